//! Helpers of the sequence operators (also Optional and Scan): taking sequence inputs, sequence
//! positions, slicing and stacking along an axis, and building sub-graph executors.

use crate::engine::Executor;
use crate::error::Result;
use crate::kernel::{KernelContext, OpNode};
use crate::tensor::{Kind, Tensor};
use crate::value::{Inputs, Value};
use burn::tensor::Slice;

/// One output value.
pub fn one(v: Value) -> Result<Vec<Option<Value>>> {
    Ok(vec![Some(v)])
}

/// The sequence at input `i`, which must be present.
pub fn sequence(ctx: &KernelContext<'_>, ins: &mut Inputs<'_>, i: usize) -> Result<Vec<Tensor>> {
    match ins.value(i) {
        Some(Value::Sequence(s)) => Ok(s),
        Some(_) => Err(ctx.err(format!("input {i} must be a sequence"))),
        None => Err(ctx.err(format!("input {i} is required"))),
    }
}

/// Reads a position input: a scalar (or one-element) integer tensor, wrapped into `0..=len`
/// (`0..len` unless `allow_end`).
pub fn position(ctx: &KernelContext<'_>, t: &Tensor, len: usize, allow_end: bool) -> Result<usize> {
    if t.kind() != Kind::Int || t.numel() != 1 {
        return Err(ctx.err(format!("position must be one integer, not {} of shape {:?}", t.dtype(), t.shape())));
    }
    let p = t.to_i64_vec().first().copied().unwrap_or(0);
    let n = len as i64;
    let hi = if allow_end { n } else { n - 1 };
    if p < -n || p > hi {
        return Err(ctx.err(format!("position {p} is out of range for a sequence of {len} tensors")));
    }
    Ok(if p < 0 { (p + n) as usize } else { p as usize })
}

/// The dims of `t` narrowed to `start..end` along `axis` (bounds checked by the caller).
pub fn narrow(t: Tensor, axis: usize, start: usize, end: usize) -> Tensor {
    let mut ranges = vec![Slice::new(0, None, 1); t.rank()];
    ranges[axis] = Slice::new(start as isize, Some(end as isize), 1);
    t.slice(&ranges)
}

/// Entry `i` along `axis` with that axis removed.
pub fn take(t: Tensor, axis: usize, i: usize) -> Tensor {
    let mut shape = t.shape();
    shape.remove(axis);
    narrow(t, axis, i, i + 1).reshape(&shape)
}

/// Inserts a unit axis at `axis` (`0..=rank`).
pub fn unsqueeze(t: Tensor, axis: usize) -> Tensor {
    let mut shape = t.shape();
    shape.insert(axis, 1);
    t.reshape(&shape)
}

/// Stacks equal-shaped, same-typed tensors along a new axis `axis` (`0..=rank`); checks them.
pub fn stack(ctx: &KernelContext<'_>, parts: Vec<Tensor>, axis: usize, what: &str) -> Result<Tensor> {
    let Some(first) = parts.first() else { return Err(ctx.err(format!("{what}: nothing to stack"))) };
    let (shape, dtype) = (first.shape(), first.dtype());
    if axis > shape.len() {
        return Err(ctx.err(format!("{what}: axis {axis} is out of range for rank {}", shape.len() + 1)));
    }
    if let Some(bad) = parts.iter().find(|t| t.shape() != shape || t.dtype() != dtype) {
        return Err(ctx.err(format!("{what}: {} {:?} differs from {dtype} {shape:?}", bad.dtype(), bad.shape())));
    }
    Ok(Tensor::cat(parts.into_iter().map(|t| unsqueeze(t, axis)).collect(), axis))
}

/// A sub-graph attribute built into an executor, with its input and output names.
pub struct Body {
    pub exec: Executor,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

pub fn body(node: &OpNode<'_>, name: &str) -> Result<Body> {
    let attr = node.op.attr(name).ok_or_else(|| node.err(format!("missing attribute `{name}`")))?;
    let graph = attr.as_graph(name).map_err(|e| node.err(e.to_string()))?;
    let inputs: Vec<String> = graph.inputs().iter().map(|v| graph.var_name(*v).to_string()).collect();
    let outputs: Vec<String> = graph.outputs().iter().map(|v| graph.var_name(*v).to_string()).collect();
    let opset = node.opset;
    let exec = Executor::new(graph, node.registry, node.device, &|_| opset)?;
    Ok(Body { exec, inputs, outputs })
}
