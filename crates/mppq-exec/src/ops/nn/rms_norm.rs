//! RMSNormalization (opset 23): `x / sqrt(mean(x^2) + epsilon) * scale` over the axes from
//! `axis` to the last, computed in the `stash_type` precision.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, mean_dims, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, broadcast_shapes, normalize_axis};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("RMSNormalization", 23, build);
}

struct RmsNorm {
    axis: i64,
    epsilon: f64,
    stash_float: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(RmsNorm {
        axis: node.int("axis", -1)?,
        epsilon: f64::from(node.float("epsilon", 1e-5)?),
        stash_float: node.int("stash_type", 1)? == 1,
    }))
}

impl Kernel for RmsNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let scale = float_tensor(ctx, ins.tensor(1)?, "scale")?;
        let xs = x.shape();
        let rank = xs.len();
        let Some(axis) = normalize_axis(self.axis, rank).filter(|_| rank > 0) else {
            return Err(ctx.err(format!("axis {} is out of range for rank {rank}", self.axis)));
        };
        let norm = &xs[axis..];
        let ss = scale.shape();
        if ss.len() > norm.len() || broadcast_shapes(&ss, norm).as_deref() != Some(norm) {
            return Err(shape_err(ctx, ss, norm.to_vec(), "scale does not broadcast to the normalised shape"));
        }
        let in_type = x.dtype();
        let work = if self.stash_float { DataType::Float } else { in_type };
        let mut lifted = vec![1; rank - ss.len()];
        lifted.extend_from_slice(&ss);
        let scale = scale.cast(work)?.reshape(&lifted).into_dispatch();
        let xd = x.cast(work)?.into_dispatch();
        let axes: Vec<usize> = (axis..rank).collect();
        let ms = mean_dims(Dispatch::float_mul(xd.clone(), xd.clone()), &axes);
        let inv = Dispatch::float_recip(Dispatch::float_sqrt(Dispatch::float_add_scalar(ms, self.epsilon.into())));
        let y = Dispatch::float_mul(Dispatch::float_mul(xd, inv), scale);
        Ok(vec![Some(Tensor::from_dispatch(y).cast(in_type)?.into())])
    }
}
