//! Host-value helpers (signal operators, Det, Unique, CenterCropPad): float tensors from host
//! values in a given dtype, scalar reshapes, axis and size checks.

use crate::error::Result;
use crate::kernel::KernelContext;
use crate::tensor::{Tensor, normalize_axis};
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::{DType, Shape};

/// A float tensor of `shape` from f64 values, stored with the float dtype `dtype`.
pub fn float_from_f64(shape: &[usize], values: Vec<f64>, dtype: DType, ctx: &KernelContext<'_>) -> Tensor {
    let data = burn::tensor::TensorData::new(values, Shape::from(shape.to_vec()));
    let t = Dispatch::float_from_data(data, ctx.device.dispatch());
    let t = if dtype == DType::F64 { t } else { Dispatch::float_cast(t, dtype.into()) };
    Tensor::from_dispatch(t)
}

/// Normalises one axis or errors.
pub fn axis(ctx: &KernelContext<'_>, axis: i64, rank: usize) -> Result<usize> {
    normalize_axis(axis, rank).ok_or_else(|| ctx.err(format!("axis {axis} is out of range for rank {rank}")))
}

/// Requires a float tensor.
pub fn require_float(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<()> {
    if t.kind() == crate::tensor::Kind::Float {
        Ok(())
    } else {
        Err(ctx.err(format!("{what} must be a float tensor, got {}", t.dtype())))
    }
}

/// One output.
pub fn one(t: Tensor) -> Result<Vec<Option<crate::value::Value>>> {
    Ok(vec![Some(t.into())])
}

/// A zero tensor of `shape` with the type of `like`.
pub fn zeros(shape: &[usize], like: &Tensor, ctx: &KernelContext<'_>) -> Tensor {
    use burn::backend::ops::{BoolTensorOps, IntTensorOps};
    let dev = ctx.device.dispatch();
    let s = Shape::from(shape.to_vec());
    let dt = like.burn_dtype();
    Tensor::from_dispatch(match like.kind() {
        crate::tensor::Kind::Float => Dispatch::float_zeros(s, dev, dt.into()),
        crate::tensor::Kind::Int => Dispatch::int_zeros(s, dev, dt.into()),
        crate::tensor::Kind::Bool => Dispatch::bool_zeros(s, dev, crate::device::bool_dtype(dev)),
    })
}

/// Checks a shape computed from input values against the tensor budget ([`crate::budget`]).
pub fn check_size(ctx: &KernelContext<'_>, shape: &[usize]) -> Result<()> {
    crate::budget::check(shape, 4).map(|_| ()).map_err(|m| ctx.err(m))
}
