//! BatchNormalization: inference (`y = (x - mean) / sqrt(var + eps) * scale + bias`, folded into
//! one multiply-add per channel) and training mode (batch statistics; running mean and
//! variance outputs updated with `momentum`).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, float_tensor, moments, reshape, scalar_like, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("BatchNormalization", 1, build);
}

struct BatchNorm {
    epsilon: f64,
    momentum: f64,
    training: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let training = layer::opset(node) >= 14 && node.int("training_mode", 0)? != 0;
    if layer::opset(node) < 9 && node.int("spatial", 1)? == 0 {
        return Err(node.err("spatial=0 (per-activation statistics) is not supported"));
    }
    Ok(Box::new(BatchNorm {
        epsilon: f64::from(node.float("epsilon", 1e-5)?),
        momentum: f64::from(node.float("momentum", 0.9)?),
        training,
    }))
}

impl Kernel for BatchNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let xs = x.shape();
        if xs.len() < 2 {
            return Err(shape_err(ctx, xs, vec![], "input must be [N,C,..]"));
        }
        let c = xs[1];
        let mut params = Vec::with_capacity(4);
        for (i, name) in ["scale", "B", "input_mean", "input_var"].iter().enumerate() {
            let p = float_tensor(ctx, ins.tensor(i + 1)?, name)?;
            if p.shape() != [c] {
                return Err(shape_err(ctx, p.shape(), vec![c], format!("{name} must be [C]")));
            }
            let p = p.cast(x.dtype())?;
            let mut s = vec![1; xs.len()];
            s[1] = c;
            params.push(reshape(p.into_dispatch(), &s));
        }
        let [scale, bias, mean, var]: [_; 4] = params.try_into().map_err(|_| ctx.err("four parameters expected"))?;
        let xd = x.into_dispatch();
        let axes: Vec<usize> = (0..xs.len()).filter(|&a| a != 1).collect();
        let (use_mean, use_var, running) = if self.training {
            let (bm, bv) = moments(xd.clone(), &axes);
            let m = scalar_like(&bm, self.momentum);
            let one_m = scalar_like(&bm, 1.0 - self.momentum);
            let rm = Dispatch::float_add(
                Dispatch::float_mul(mean, m.clone()),
                Dispatch::float_mul(bm.clone(), one_m.clone()),
            );
            let rv = Dispatch::float_add(Dispatch::float_mul(var, m), Dispatch::float_mul(bv.clone(), one_m));
            (bm, bv, Some((rm, rv)))
        } else {
            (mean, var, None)
        };
        let inv = Dispatch::float_recip(Dispatch::float_sqrt(Dispatch::float_add_scalar(use_var, self.epsilon.into())));
        let factor = Dispatch::float_mul(scale, inv);
        let shift = Dispatch::float_sub(bias, Dispatch::float_mul(use_mean, factor.clone()));
        let y = Dispatch::float_add(Dispatch::float_mul(xd, factor), shift);
        let mut outs = vec![Some(Tensor::from_dispatch(y).into())];
        if let Some((rm, rv)) = running {
            outs.push(Some(Tensor::from_dispatch(reshape(rm, &[c])).into()));
            outs.push(Some(Tensor::from_dispatch(reshape(rv, &[c])).into()));
        }
        Ok(outs)
    }
}
