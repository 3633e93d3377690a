//! GroupNormalization: normalises each of `num_groups` channel groups over its channels and
//! spatial axes; scale and bias are per group in opset 18 and per channel from opset 21
//! (which also computes in the `stash_type` precision).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, float_tensor, moments, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("GroupNormalization", 18, build);
}

struct GroupNorm {
    groups: usize,
    epsilon: f64,
    per_channel: bool,
    stash_float: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let groups = node.int("num_groups", 0)?;
    if groups < 1 {
        return Err(node.err(format!("num_groups must be positive, got {groups}")));
    }
    let per_channel = layer::opset(node) >= 21;
    Ok(Box::new(GroupNorm {
        groups: groups as usize,
        epsilon: f64::from(node.float("epsilon", 1e-5)?),
        per_channel,
        stash_float: per_channel && node.int("stash_type", 1)? == 1,
    }))
}

impl Kernel for GroupNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let xs = x.shape();
        let g = self.groups;
        if xs.len() < 2 || xs[1] % g != 0 {
            return Err(shape_err(ctx, xs, vec![g], "channels must be a multiple of num_groups"));
        }
        let (n, c) = (xs[0], xs[1]);
        let in_type = x.dtype();
        let work = if self.stash_float { DataType::Float } else { in_type };
        let want = if self.per_channel { c } else { g };
        let mut params = Vec::new();
        for (i, name) in [(1, "scale"), (2, "bias")] {
            let p = float_tensor(ctx, ins.tensor(i)?, name)?;
            if p.shape() != [want] {
                return Err(shape_err(ctx, p.shape(), vec![want], format!("{name} has the wrong length")));
            }
            let p = p.cast(work)?.into_dispatch();
            // Per-group parameters apply to every channel of the group.
            let p = if self.per_channel {
                p
            } else {
                reshape(Dispatch::float_expand(reshape(p, &[g, 1]), vec![g, c / g].into()), &[c])
            };
            let mut s = vec![1; xs.len()];
            s[1] = c;
            params.push(reshape(p, &s));
        }
        let rest: usize = xs[1..].iter().product::<usize>() / g;
        let xd = reshape(x.cast(work)?.into_dispatch(), &[n, g, rest]);
        let (mean, var) = moments(xd.clone(), &[2]);
        let inv = Dispatch::float_recip(Dispatch::float_sqrt(Dispatch::float_add_scalar(var, self.epsilon.into())));
        let y = reshape(Dispatch::float_mul(Dispatch::float_sub(xd, mean), inv), &xs);
        let bias = params.pop().ok_or_else(|| ctx.err("bias missing"))?;
        let scale = params.pop().ok_or_else(|| ctx.err("scale missing"))?;
        let y = Dispatch::float_add(Dispatch::float_mul(y, scale), bias);
        Ok(vec![Some(Tensor::from_dispatch(y).cast(in_type)?.into())])
    }
}
