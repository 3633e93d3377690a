//! LayerNormalization (opset 17): normalises over the axes from `axis` to the last, applies
//! Scale and optional B (broadcast to the normalised shape), and returns Mean and InvStdDev
//! when asked; computed in the `stash_type` precision.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, moments, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, broadcast_shapes};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("LayerNormalization", 17, build);
}

struct LayerNorm {
    axis: i64,
    epsilon: f64,
    stash_float: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(LayerNorm {
        axis: node.int("axis", -1)?,
        epsilon: f64::from(node.float("epsilon", 1e-5)?),
        stash_float: node.int("stash_type", 1)? == 1,
    }))
}

/// Brings a parameter to the input's rank, checking it broadcasts to `norm` (the trailing
/// normalised shape).
fn param(
    ctx: &KernelContext<'_>,
    p: Tensor,
    norm: &[usize],
    rank: usize,
    dtype: DataType,
    name: &str,
) -> Result<Tensor> {
    let p = float_tensor(ctx, p, name)?;
    let ps = p.shape();
    if ps.len() > norm.len() || broadcast_shapes(&ps, norm).as_deref() != Some(norm) {
        return Err(shape_err(ctx, ps, norm.to_vec(), format!("{name} does not broadcast to the normalised shape")));
    }
    let mut lifted = vec![1; rank - ps.len()];
    lifted.extend_from_slice(&ps);
    p.cast(dtype).map(|p| p.reshape(&lifted))
}

impl Kernel for LayerNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let xs = x.shape();
        let rank = xs.len();
        let Some(axis) = crate::tensor::normalize_axis(self.axis, rank).filter(|_| rank > 0) else {
            return Err(ctx.err(format!("axis {} is out of range for rank {rank}", self.axis)));
        };
        let in_type = x.dtype();
        let work = if self.stash_float { DataType::Float } else { in_type };
        let norm = &xs[axis..];
        let scale = param(ctx, ins.tensor(1)?, norm, rank, work, "Scale")?;
        let bias = ins.opt_tensor(2)?.map(|b| param(ctx, b, norm, rank, work, "B")).transpose()?;
        let xd = x.cast(work)?.into_dispatch();
        let axes: Vec<usize> = (axis..rank).collect();
        let (mean, var) = moments(xd.clone(), &axes);
        let inv = Dispatch::float_recip(Dispatch::float_sqrt(Dispatch::float_add_scalar(var, self.epsilon.into())));
        let mut y = Dispatch::float_mul(
            Dispatch::float_mul(Dispatch::float_sub(xd, mean.clone()), inv.clone()),
            scale.into_dispatch(),
        );
        if let Some(b) = bias {
            y = Dispatch::float_add(y, b.into_dispatch());
        }
        let y = Tensor::from_dispatch(y).cast(in_type)?;
        Ok(vec![Some(y.into()), Some(Tensor::from_dispatch(mean).into()), Some(Tensor::from_dispatch(inv).into())])
    }
}
