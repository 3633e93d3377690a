//! Axis and constant-tensor helpers (reductions, TopK, CumSum/CumProd, QuantizeLinear): constant
//! tensors, float/int dispatch, axis lists.

use crate::error::Result;
use crate::kernel::KernelContext;
use crate::tensor::{Kind, Tensor, normalize_axis};
use burn::backend::Dispatch;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::tensor::{Scalar, Shape};

/// A tensor of `shape` filled with `value`, of the same dtype as `like`.
pub fn full_like_dtype(shape: &[usize], value: f64, like: &Tensor, ctx: &KernelContext<'_>) -> Tensor {
    let dev = ctx.device.dispatch();
    let shape = Shape::from(shape.to_vec());
    let dt = like.burn_dtype();
    let inner = match like.kind() {
        Kind::Float => Dispatch::float_full(shape, Scalar::from(value), dev, dt.into()),
        Kind::Int => Dispatch::int_full(shape, Scalar::from(value as i64), dev, dt.into()),
        Kind::Bool => {
            let z = Dispatch::bool_zeros(shape, dev, crate::device::bool_dtype(dev));
            if value != 0.0 { Dispatch::bool_not(z) } else { z }
        }
    };
    Tensor::from_dispatch(inner)
}

/// Normalises a list of possibly negative axes for `rank`, rejecting out-of-range and repeated ones.
pub fn normalize_axes(ctx: &KernelContext<'_>, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank).ok_or_else(|| ctx.err(format!("axis {a} is out of range for rank {rank}")))?;
        if out.contains(&n) {
            return Err(ctx.err(format!("axis {a} is repeated")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Normalises one axis or errors.
pub fn axis(ctx: &KernelContext<'_>, axis: i64, rank: usize) -> Result<usize> {
    normalize_axis(axis, rank).ok_or_else(|| ctx.err(format!("axis {axis} is out of range for rank {rank}")))
}

/// Flips a tensor along `axes` (any kind).
pub fn flip(t: Tensor, axes: &[usize]) -> Tensor {
    let inner = match t.kind() {
        Kind::Float => Dispatch::float_flip(t.into_dispatch(), axes),
        Kind::Int => Dispatch::int_flip(t.into_dispatch(), axes),
        Kind::Bool => Dispatch::bool_flip(t.into_dispatch(), axes),
    };
    Tensor::from_dispatch(inner)
}

/// Element-wise binary float op on same-shape (or broadcastable, checked by caller) tensors.
pub fn fbin(
    a: &Tensor,
    b: &Tensor,
    f: fn(burn::backend::DispatchTensor, burn::backend::DispatchTensor) -> burn::backend::DispatchTensor,
) -> Tensor {
    Tensor::from_dispatch(f(a.dispatch().clone(), b.dispatch().clone()))
}

/// Reshapes a per-axis vector (length `len`) so it broadcasts against a tensor of `rank` along `axis`.
pub fn axis_shape(rank: usize, axis: usize, len: usize) -> Vec<usize> {
    let mut s = vec![1; rank];
    if rank > 0 {
        s[axis] = len;
    }
    s
}

/// Test helper: runs a graph of the single operation `op` on named inputs (an empty name
/// leaves that input slot out) and returns its `n_out` outputs.
#[cfg(test)]
pub fn run_single(op: mppq_ir::Operation, inputs: Vec<(&str, Option<Tensor>)>, n_out: usize) -> Vec<Tensor> {
    use crate::{Device, Executor, OpRegistry, Value};
    let mut g = mppq_ir::Graph::new("single");
    let mut ins = Vec::new();
    let mut feeds: Vec<(String, Value)> = Vec::new();
    for (name, t) in inputs {
        match t {
            Some(t) => {
                let v = g.ensure_variable(name);
                g.add_graph_input(v).unwrap();
                ins.push(Some(v));
                feeds.push((name.to_string(), t.into()));
            }
            None => ins.push(None),
        }
    }
    let outs: Vec<_> = (0..n_out).map(|i| g.ensure_variable(&format!("out{i}"))).collect();
    g.add_operation(op, &ins, &outs.iter().map(|v| Some(*v)).collect::<Vec<_>>()).unwrap();
    for o in &outs {
        g.add_graph_output(*o).unwrap();
    }
    let device = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 0).unwrap();
    exec.run(feeds, &mut []).unwrap().into_iter().map(|(_, v)| v.into_tensor().unwrap()).collect()
}
