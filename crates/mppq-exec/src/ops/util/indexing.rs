//! Indexing helpers (tensor and generator operators, Expand): kind-dispatching Burn primitives the
//! core `Tensor` does not offer (flip, gather, scatter, select-assign, filled tensors), exact
//! host-side index arithmetic, and error shorthands.

use crate::device::Device;
use crate::error::{ExecError, Result};
use crate::kernel::KernelContext;
use crate::tensor::{Kind, Tensor, normalize_axis};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::tensor::{IndexingUpdateOp, Shape};
use mppq_ir::DataType;

/// One output tensor.
pub fn one(t: Tensor) -> Result<Vec<Option<Value>>> {
    Ok(vec![Some(Value::Tensor(t))])
}

/// A shape error naming the node.
pub fn shape_err(ctx: &KernelContext<'_>, left: &[usize], right: &[usize], message: impl Into<String>) -> ExecError {
    ExecError::Shape {
        node: ctx.node.to_string(),
        op_type: ctx.op_type.to_string(),
        left: left.to_vec(),
        right: right.to_vec(),
        message: message.into(),
    }
}

/// Normalises an axis or reports it out of range.
pub fn axis(ctx: &KernelContext<'_>, axis: i64, rank: usize) -> Result<usize> {
    if rank == 0 {
        return Err(ctx.err(format!("axis {axis} given for a scalar (rank 0) tensor")));
    }
    normalize_axis(axis, rank).ok_or_else(|| ctx.err(format!("axis {axis} is out of range for rank {rank}")))
}

/// Normalises a list of axes (no duplicates allowed).
pub fn axes(ctx: &KernelContext<'_>, list: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(list.len());
    for &a in list {
        let a = axis(ctx, a, rank)?;
        if out.contains(&a) {
            return Err(ctx.err(format!("axis {a} is repeated")));
        }
        out.push(a);
    }
    Ok(out)
}

/// Reads an integer index/shape input as exact i64 values; float or bool inputs are errors.
pub fn int_input(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<Vec<i64>> {
    if t.kind() != Kind::Int {
        return Err(ctx.err(format!("{what} must be an integer tensor, not {}", t.dtype())));
    }
    Ok(t.to_i64_vec())
}

/// Converts a dimension list to `usize`, rejecting negative values.
pub fn dims(ctx: &KernelContext<'_>, v: &[i64], what: &str) -> Result<Vec<usize>> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| ctx.err(format!("{what} has a negative dimension {d}")))).collect()
}

/// Wraps negative indices along a dimension of size `dim` and checks bounds.
pub fn wrap_indices(ctx: &KernelContext<'_>, idx: &mut [i64], dim: usize) -> Result<()> {
    let d = dim as i64;
    for i in idx.iter_mut() {
        let v = if *i < 0 { *i + d } else { *i };
        if !(0..d).contains(&v) {
            return Err(ctx.err(format!("index {i} is out of range for a dimension of size {dim}")));
        }
        *i = v;
    }
    Ok(())
}

/// Row-major strides.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The one value of a single-element tensor, widened to f64.
pub fn scalar_f64(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<f64> {
    match t.to_f64_vec()[..] {
        [v] => Ok(v),
        _ => Err(ctx.err(format!("{what} must have exactly one element"))),
    }
}

/// The one value of a single-element integer tensor, exact.
pub fn scalar_i64(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<i64> {
    match int_input(ctx, t, what)?[..] {
        [v] => Ok(v),
        _ => Err(ctx.err(format!("{what} must have exactly one element"))),
    }
}

/// Product of dimensions; an error when a tensor of that shape would exceed the tensor budget
/// ([`crate::budget`], counted at 4 bytes per element) or the count overflows.
pub fn numel(ctx: &KernelContext<'_>, shape: &[usize]) -> Result<usize> {
    crate::budget::check(shape, 4).map_err(|m| ctx.err(m))
}

/// An int64 index vector tensor.
pub fn index_tensor(idx: Vec<i64>, device: &Device) -> Tensor {
    let n = idx.len();
    Tensor::from_i64(&[n], idx, device)
}

/// Reverses the order along `axes`.
pub fn flip(t: Tensor, axes: &[usize]) -> Tensor {
    if axes.is_empty() {
        return t;
    }
    let kind = t.kind();
    let x = t.into_dispatch();
    Tensor::from_dispatch(match kind {
        Kind::Float => Dispatch::float_flip(x, axes),
        Kind::Int => Dispatch::int_flip(x, axes),
        Kind::Bool => Dispatch::bool_flip(x, axes),
    })
}

/// `Tensor::select` that keeps boolean data boolean. Burn 0.22.1 on flex returns a boolean
/// tensor labelled `U8` from `bool_select`/`bool_gather`, which later kind-dispatching
/// operations mistake for an int tensor; booleans therefore go through int64 (the device's
/// index type, which every backend the executor runs on holds; uint8 is missing on WGSL).
pub fn select(t: Tensor, dim: usize, idx: &Tensor) -> Result<Tensor> {
    if t.kind() == Kind::Bool {
        return t.cast(DataType::Int64)?.select(dim, idx).cast(DataType::Bool);
    }
    Ok(t.select(dim, idx))
}

/// `out[..i..] = t[..idx[..i..]..]` along `dim`; `idx` has `t`'s shape except along `dim`.
pub fn gather(t: Tensor, dim: usize, idx: &Tensor) -> Result<Tensor> {
    let (x, i) = (t.clone().into_dispatch(), idx.dispatch().clone());
    match t.kind() {
        Kind::Float => Ok(Tensor::from_dispatch(Dispatch::float_gather(dim, x, i))),
        Kind::Int => Ok(Tensor::from_dispatch(Dispatch::int_gather(dim, x, i))),
        Kind::Bool => gather(t.cast(DataType::Int64)?, dim, idx)?.cast(DataType::Bool),
    }
}

/// Scatters `values` into `t` along `dim` at `idx` (same shape as `values`, and as `t` outside
/// `dim`), combining with `op`. Booleans go through int64.
pub fn scatter(t: Tensor, dim: usize, idx: &Tensor, values: Tensor, op: IndexingUpdateOp) -> Result<Tensor> {
    match t.kind() {
        Kind::Float => Ok(Tensor::from_dispatch(Dispatch::float_scatter(
            dim,
            t.into_dispatch(),
            idx.dispatch().clone(),
            values.into_dispatch(),
            op,
        ))),
        Kind::Int => Ok(Tensor::from_dispatch(Dispatch::int_scatter(
            dim,
            t.into_dispatch(),
            idx.dispatch().clone(),
            values.into_dispatch(),
            op,
        ))),
        Kind::Bool => {
            let (t, v) = (t.cast(DataType::Int64)?, values.cast(DataType::Int64)?);
            scatter(t, dim, idx, v, op)?.cast(DataType::Bool)
        }
    }
}

/// Updates the slices of `t` along `dim` picked by the int64 vector `idx` with `values`
/// (`t`'s shape with `idx.len()` along `dim`), combining with `op`. Booleans go through int64.
pub fn select_assign(t: Tensor, dim: usize, idx: &Tensor, values: Tensor, op: IndexingUpdateOp) -> Result<Tensor> {
    match t.kind() {
        Kind::Float => Ok(Tensor::from_dispatch(Dispatch::float_select_assign(
            t.into_dispatch(),
            dim,
            idx.dispatch().clone(),
            values.into_dispatch(),
            op,
        ))),
        Kind::Int => Ok(Tensor::from_dispatch(Dispatch::int_select_assign(
            t.into_dispatch(),
            dim,
            idx.dispatch().clone(),
            values.into_dispatch(),
            op,
        ))),
        Kind::Bool => {
            let (t, v) = (t.cast(DataType::Int64)?, values.cast(DataType::Int64)?);
            select_assign(t, dim, idx, v, op)?.cast(DataType::Bool)
        }
    }
}

/// Host values for building small tensors of any type exactly.
pub enum HostValues {
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// Builds a tensor of ONNX type `dtype` from host values (f64 keeps doubles exact; i64 keeps
/// integers exact).
pub fn host_tensor(shape: &[usize], values: HostValues, dtype: DataType, device: &Device) -> Result<Tensor> {
    let dev = device.dispatch();
    let t = match values {
        HostValues::F64(v) if dtype == DataType::Double => {
            let data = burn::tensor::TensorData::new(v, Shape::from(shape.to_vec()));
            return Ok(Tensor::from_dispatch(Dispatch::float_from_data(data, dev)));
        }
        HostValues::F64(v) if dtype.is_float() => {
            Tensor::from_f32(shape, v.into_iter().map(|x| x as f32).collect(), device)
        }
        HostValues::F64(v) if dtype == DataType::Bool => {
            Tensor::from_bool(shape, v.into_iter().map(|x| x != 0.0).collect(), device)
        }
        HostValues::F64(v) => Tensor::from_i64(shape, v.into_iter().map(|x| x as i64).collect(), device),
        HostValues::I64(v) if dtype == DataType::Bool => {
            Tensor::from_bool(shape, v.into_iter().map(|x| x != 0).collect(), device)
        }
        HostValues::I64(v) if dtype.is_float() && dtype != DataType::Double => {
            Tensor::from_f32(shape, v.into_iter().map(|x| x as f32).collect(), device)
        }
        HostValues::I64(v) if dtype == DataType::Double => {
            return host_tensor(shape, HostValues::F64(v.into_iter().map(|x| x as f64).collect()), dtype, device);
        }
        HostValues::I64(v) => Tensor::from_i64(shape, v, device),
    };
    t.cast(dtype)
}

/// An empty tensor (some dimension is 0) of any type.
pub fn empty(shape: &[usize], dtype: DataType, device: &Device) -> Result<Tensor> {
    let values = if dtype.is_float() { HostValues::F64(vec![]) } else { HostValues::I64(vec![]) };
    host_tensor(shape, values, dtype, device)
}

/// A tensor of `shape` filled with the single value of `scalar` (any type), as a broadcast view
/// when possible.
pub fn filled(scalar: &Tensor, shape: &[usize], device: &Device) -> Result<Tensor> {
    if shape.contains(&0) {
        return empty(shape, scalar.dtype(), device);
    }
    let ones = vec![1; shape.len()];
    Ok(scalar.clone().reshape(&ones).expand(shape))
}

/// A one-element tensor holding `value` converted to `dtype`.
pub fn scalar(value: f64, dtype: DataType, device: &Device) -> Result<Tensor> {
    if dtype.is_float() || dtype == DataType::Bool {
        host_tensor(&[1], HostValues::F64(vec![value]), dtype, device)
    } else {
        host_tensor(&[1], HostValues::I64(vec![value as i64]), dtype, device)
    }
}

/// The single entry `i` of `axis` (kept as a length-1 axis).
pub fn slice_axis_one(t: Tensor, axis: usize, i: usize) -> Tensor {
    let mut ranges = vec![burn::tensor::Slice::new(0, None, 1); t.rank()];
    ranges[axis] = burn::tensor::Slice::new(i as isize, Some(i as isize + 1), 1);
    t.slice(&ranges)
}
