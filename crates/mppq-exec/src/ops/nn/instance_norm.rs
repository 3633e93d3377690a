//! InstanceNormalization: per-(batch, channel) normalisation over the spatial axes, then a
//! per-channel scale and bias.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, moments, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("InstanceNormalization", 1, build);
}

struct InstanceNorm {
    epsilon: f64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(InstanceNorm { epsilon: f64::from(node.float("epsilon", 1e-5)?) }))
}

impl Kernel for InstanceNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "input")?;
        let xs = x.shape();
        if xs.len() < 3 {
            return Err(shape_err(ctx, xs, vec![], "input must be [N,C,spatial..]"));
        }
        let c = xs[1];
        let mut pshape = vec![1; xs.len()];
        pshape[1] = c;
        let mut params = Vec::new();
        for (i, name) in [(1, "scale"), (2, "B")] {
            let p = float_tensor(ctx, ins.tensor(i)?, name)?;
            if p.shape() != [c] {
                return Err(shape_err(ctx, p.shape(), vec![c], format!("{name} must be [C]")));
            }
            params.push(reshape(p.cast(x.dtype())?.into_dispatch(), &pshape));
        }
        let plane: usize = xs[2..].iter().product();
        let xd = reshape(x.into_dispatch(), &[xs[0], c, plane]);
        let (mean, var) = moments(xd.clone(), &[2]);
        let inv = Dispatch::float_recip(Dispatch::float_sqrt(Dispatch::float_add_scalar(var, self.epsilon.into())));
        let y = Dispatch::float_mul(Dispatch::float_sub(xd, mean), inv);
        let y = reshape(y, &xs);
        let bias = params.pop().ok_or_else(|| ctx.err("B missing"))?;
        let scale = params.pop().ok_or_else(|| ctx.err("scale missing"))?;
        let y = Dispatch::float_add(Dispatch::float_mul(y, scale), bias);
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
