//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: one kernel (SCE is NLL on the
//! log-softmax of the scores over the class axis, and can also return that log-probability).
//! Reductions none/sum/mean, `ignore_index`, optional per-class weights, any number of
//! trailing spatial dims.

use super::util::{float_from_f64, one, require_float};
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::FloatTensorOps;
use burn::backend::Dispatch;
use burn::tensor::Shape;

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
        r => return Err(node.err(format!("unknown reduction `{r}`"))),
    };
    let ignore_index = if node.has("ignore_index") { Some(node.int("ignore_index", 0)?) } else { None };
    Ok(Box::new(Loss { softmax: node.op.op_type == "SoftmaxCrossEntropyLoss", reduction, ignore_index }))
}

/// Log-softmax over axis 1 (numerically stable).
fn log_softmax_axis1(x: Tensor) -> Tensor {
    let x = x.into_dispatch();
    let m = Dispatch::float_max_dim(x.clone(), 1);
    let shifted = Dispatch::float_sub(x, m);
    let lse = Dispatch::float_log(Dispatch::float_sum_dim(Dispatch::float_exp(shifted.clone()), 1));
    Tensor::from_dispatch(Dispatch::float_sub(shifted, lse))
}

impl Kernel for Loss {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let target = ins.tensor(1)?;
        let weight = ins.opt_tensor(2)?;
        require_float(ctx, &x, "input")?;
        if target.kind() != Kind::Int {
            return Err(ctx.err("target must be an integer tensor"));
        }
        let xs = x.shape();
        if xs.len() < 2 {
            return Err(ctx.err("input must have rank >= 2 ([N, C, d1, ...])"));
        }
        let c = xs[1];
        let mut ts = vec![xs[0]];
        ts.extend_from_slice(&xs[2..]);
        if target.shape() != ts {
            return Err(crate::ExecError::Shape {
                node: ctx.node.to_string(),
                op_type: ctx.op_type.to_string(),
                left: xs,
                right: target.shape(),
                message: "do not fit as input [N, C, d...] and target [N, d...]".into(),
            });
        }
        let w: Option<Vec<f64>> = match &weight {
            Some(w) => {
                if w.shape() != [c] {
                    return Err(ctx.err(format!("weight must have shape [{c}], got {:?}", w.shape())));
                }
                Some(w.to_f64_vec())
            }
            None => None,
        };
        // Host side: per-element class index (0 where ignored) and weight (0 where ignored).
        let t = target.to_i64_vec();
        let mut idx = Vec::with_capacity(t.len());
        let mut we = Vec::with_capacity(t.len());
        for &k in &t {
            if Some(k) == self.ignore_index {
                idx.push(0i64);
                we.push(0.0f64);
                continue;
            }
            if k < 0 || k as usize >= c {
                return Err(ctx.err(format!("target class {k} is out of range for {c} classes")));
            }
            idx.push(k);
            we.push(w.as_ref().map_or(1.0, |w| w[k as usize]));
        }
        let dtype = x.burn_dtype();
        let logp = if self.softmax { log_softmax_axis1(x) } else { x };
        let mut ishape = ts.clone();
        ishape.insert(1, 1);
        let idx_t = Tensor::from_i64(&ishape, idx, ctx.device);
        let picked = Dispatch::float_gather(1, logp.dispatch().clone(), idx_t.into_dispatch());
        let picked = Dispatch::float_reshape(picked, Shape::from(ts.clone()));
        let wsum: f64 = we.iter().sum();
        let w_t = float_from_f64(&ts, we, dtype, ctx);
        let loss = Dispatch::float_neg(Dispatch::float_mul(picked, w_t.into_dispatch()));
        let loss = match self.reduction {
            Reduction::None => loss,
            Reduction::Sum => Dispatch::float_reshape(Dispatch::float_sum(loss), Shape::from(Vec::<usize>::new())),
            Reduction::Mean => {
                let s = Dispatch::float_reshape(Dispatch::float_sum(loss), Shape::from(Vec::<usize>::new()));
                let d = float_from_f64(&[], vec![wsum], dtype, ctx);
                Dispatch::float_div(s, d.into_dispatch())
            }
        };
        let loss = Tensor::from_dispatch(loss);
        if self.softmax {
            Ok(vec![Some(loss.into()), Some(logp.into())])
        } else {
            one(loss)
        }
    }
}
