//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax over the class axis
//! first, optional log_prob output): class weights, ignore_index and reductions none / sum /
//! mean (weighted mean: divided by the sum of the applied weights), as the ONNX reference.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("NegativeLogLikelihoodLoss", 12, build);
    r.register_fn("SoftmaxCrossEntropyLoss", 12, build);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

struct Loss {
    softmax: bool,
    reduction: Reduction,
    ignore_index: Option<i64>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let reduction = match node.string("reduction", "mean")?.as_str() {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => return Err(node.err(format!("unknown reduction {other}"))),
    };
    let ignore_index = if node.has("ignore_index") { Some(node.int("ignore_index", 0)?) } else { None };
    Ok(Box::new(Loss { softmax: node.op.op_type == "SoftmaxCrossEntropyLoss", reduction, ignore_index }))
}

impl Kernel for Loss {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "input")?;
        let target = ins.tensor(1)?;
        let weight = ins.opt_tensor(2)?;
        let (xs, ts) = (x.shape(), target.shape());
        if xs.len() < 2
            || target.kind() != Kind::Int
            || ts.len() != xs.len() - 1
            || ts[0] != xs[0]
            || ts[1..] != xs[2..]
            || xs[1] == 0
        {
            return Err(shape_err(ctx, xs, ts, "input must be [N,C,d..] and target integer [N,d..]"));
        }
        let (n, c) = (xs[0], xs[1]);
        let d: usize = xs[2..].iter().product();
        let dtype = x.dtype();
        let weights = match weight {
            None => None,
            Some(w) => {
                let w = float_tensor(ctx, w, "weight")?;
                if w.shape() != [c] {
                    return Err(shape_err(ctx, w.shape(), vec![c], "weight must be [C]"));
                }
                Some(w.to_f64_vec())
            }
        };
        let mut x = x.into_dispatch();
        let mut log_prob = None;
        if self.softmax {
            let max = Dispatch::float_max_dim(x.clone(), 1);
            let shifted = Dispatch::float_sub(x, max);
            let lse = Dispatch::float_log(Dispatch::float_sum_dim(Dispatch::float_exp(shifted.clone()), 1));
            x = Dispatch::float_sub(shifted, lse);
            log_prob = Some(x.clone());
        }
        let t = target.to_i64_vec();
        let mut idx = Vec::with_capacity(t.len());
        let mut w = Vec::with_capacity(t.len());
        for &v in &t {
            if Some(v) == self.ignore_index {
                idx.push(0);
                w.push(0.0);
            } else if v < 0 || v as usize >= c {
                return Err(ctx.err(format!("target {v} is not a class index below {c}")));
            } else {
                idx.push(v);
                w.push(weights.as_ref().map_or(1.0, |ws| ws[v as usize]));
            }
        }
        let weight_sum: f64 = w.iter().sum();
        let idx = Tensor::from_i64(&[n, 1, d], idx, ctx.device).into_dispatch();
        let picked = Dispatch::float_gather(1, reshape(x, &[n, c, d]), idx);
        let wt = Tensor::from_f32(&[n, 1, d], w.iter().map(|&v| v as f32).collect(), ctx.device)
            .cast(dtype)?
            .into_dispatch();
        let loss = Dispatch::float_neg(Dispatch::float_mul(picked, wt));
        let loss = match self.reduction {
            Reduction::None => Tensor::from_dispatch(reshape(loss, &ts)),
            Reduction::Sum => Tensor::from_dispatch(reshape(Dispatch::float_sum(loss), &[])),
            Reduction::Mean => {
                let s = Dispatch::float_sum(loss);
                Tensor::from_dispatch(reshape(Dispatch::float_div_scalar(s, weight_sum.into()), &[]))
            }
        };
        Ok(vec![Some(loss.into()), log_prob.map(|l| Tensor::from_dispatch(l).into())])
    }
}
