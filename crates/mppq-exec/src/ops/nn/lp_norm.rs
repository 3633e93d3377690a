//! LpNormalization: `x / ||x||_p` along one axis (p = 1 or 2); a zero norm gives zeros.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::float_tensor;
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, normalize_axis};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::TensorMetadata;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("LpNormalization", 1, build);
}

struct LpNorm {
    axis: i64,
    p: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let p = node.int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(node.err(format!("p must be 1 or 2, got {p}")));
    }
    Ok(Box::new(LpNorm { axis: node.int("axis", -1)?, p }))
}

impl Kernel for LpNorm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "input")?;
        let Some(axis) = normalize_axis(self.axis, x.rank()).filter(|_| x.rank() > 0) else {
            return Err(ctx.err(format!("axis {} is out of range for rank {}", self.axis, x.rank())));
        };
        let xd = x.into_dispatch();
        let norm = if self.p == 1 {
            Dispatch::float_sum_dim(Dispatch::float_abs(xd.clone()), axis)
        } else {
            Dispatch::float_sqrt(Dispatch::float_sum_dim(Dispatch::float_mul(xd.clone(), xd.clone()), axis))
        };
        // Where the norm is 0 the slice is all zeros; dividing by 1 keeps it so.
        let dtype = norm.dtype();
        let zero = Dispatch::bool_into_float(
            Dispatch::float_equal_elem(norm.clone(), 0.0f64.into(), crate::tensor::bool_for(&norm)),
            dtype.into(),
        );
        let norm = Dispatch::float_add(norm, zero);
        Ok(vec![Some(Tensor::from_dispatch(Dispatch::float_div(xd, norm)).into())])
    }
}
