//! Helpers of the element-wise operators (math, logical, Where, IsNaN): operand alignment (numpy
//! and legacy opset<7 broadcasting), scalar construction in a tensor's dtype, and output wrapping.

use crate::error::{ExecError, Result};
use crate::kernel::{KernelContext, OpNode};
use crate::tensor::{Kind, Tensor, broadcast_pair, broadcast_shapes};
use crate::value::Value;
use burn::backend::DispatchTensor;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::{DType, Scalar};

/// A shape error naming the node.
pub fn shape_err(ctx: &KernelContext<'_>, left: Vec<usize>, right: Vec<usize>, message: &str) -> ExecError {
    ExecError::Shape {
        node: ctx.node.to_string(),
        op_type: ctx.op_type.to_string(),
        left,
        right,
        message: message.into(),
    }
}

/// Legacy (opset < 7) broadcasting of binary operators: `broadcast` and `axis` attributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Legacy {
    /// `Some(axis)` when the node asks for broadcasting of the second operand from `axis` on.
    axis: Option<i64>,
}

impl Legacy {
    pub fn parse(node: &OpNode<'_>) -> Result<Self> {
        if node.opset >= 7 || node.int("broadcast", 0)? == 0 || !node.has("axis") {
            return Ok(Self::default());
        }
        Ok(Self { axis: Some(node.int("axis", 0)?) })
    }

    /// Reshapes `b` so that numpy broadcasting aligns it with `a` from `axis` on.
    pub fn apply(&self, ctx: &KernelContext<'_>, a: &Tensor, b: Tensor) -> Result<Tensor> {
        let Some(axis) = self.axis else { return Ok(b) };
        let (ra, sb) = (a.rank() as i64, b.shape());
        let axis = if axis < 0 { axis + ra } else { axis };
        if axis < 0 || axis + sb.len() as i64 > ra {
            return Err(shape_err(ctx, a.shape(), sb, "do not broadcast at the given axis"));
        }
        let mut shape = sb.clone();
        shape.extend(std::iter::repeat_n(1, (ra - axis) as usize - sb.len()));
        Ok(b.reshape(&shape))
    }
}

/// Checks two operands of a broadcasting binary operation (same dtype, broadcastable shapes)
/// and brings them to the common shape.
pub fn align_binary(ctx: &KernelContext<'_>, a: Tensor, b: Tensor) -> Result<(Tensor, Tensor, Vec<usize>)> {
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!("operands have different types: {} and {}", a.dtype(), b.dtype())));
    }
    align_shapes(ctx, a, b)
}

/// Brings two tensors (of any types) to their common broadcast shape.
pub fn align_shapes(ctx: &KernelContext<'_>, a: Tensor, b: Tensor) -> Result<(Tensor, Tensor, Vec<usize>)> {
    if let Some(out) = broadcast_shapes(&a.shape(), &b.shape()) {
        within_budget(ctx, &out)?;
    }
    broadcast_pair(a, b).map_err(|(left, right)| shape_err(ctx, left, right, "do not broadcast"))
}

/// A broadcast output ([N, 1] with [1, M]) can be far larger than its inputs: checked against the
/// tensor budget before anything is allocated.
fn within_budget(ctx: &KernelContext<'_>, shape: &[usize]) -> Result<()> {
    crate::budget::check(shape, 4).map(|_| ()).map_err(|m| shape_err(ctx, shape.to_vec(), vec![], &m))
}

/// Brings every tensor to the common broadcast shape of all of them; returns them and that
/// shape.
pub fn align_all(ctx: &KernelContext<'_>, ts: Vec<Tensor>) -> Result<(Vec<Tensor>, Vec<usize>)> {
    let mut out: Vec<usize> = Vec::new();
    for t in &ts {
        let s = t.shape();
        out = broadcast_shapes(&out, &s).ok_or_else(|| shape_err(ctx, out.clone(), s.clone(), "do not broadcast"))?;
    }
    within_budget(ctx, &out)?;
    let aligned = ts
        .into_iter()
        .map(|t| {
            let s = t.shape();
            let t = if s.len() < out.len() {
                let mut shape = vec![1; out.len() - s.len()];
                shape.extend_from_slice(&s);
                t.reshape(&shape)
            } else {
                t
            };
            t.expand(&out)
        })
        .collect();
    Ok((aligned, out))
}

/// An integer scalar (exact) for a tensor of dtype `dtype`.
pub fn int_scalar(v: i64, dtype: DType) -> Scalar {
    if dtype.is_uint() { Scalar::UInt(v.max(0) as u64) } else { Scalar::Int(v) }
}

/// One tensor output.
pub fn one(t: DispatchTensor) -> Result<Vec<Option<Value>>> {
    Ok(vec![Some(Tensor::from_dispatch(t).into())])
}

/// One tensor output of an element-wise operation whose ONNX result has `shape` (see
/// [`Tensor::from_dispatch_shaped`]: scalars stay scalars on devices without rank 0).
pub fn one_shaped(t: DispatchTensor, shape: &[usize]) -> Result<Vec<Option<Value>>> {
    Ok(vec![Some(Tensor::from_dispatch_shaped(t, shape).into())])
}

/// Requires a float tensor.
pub fn need_float(ctx: &KernelContext<'_>, t: &Tensor) -> Result<()> {
    if t.kind() == Kind::Float {
        Ok(())
    } else {
        Err(ctx.err(format!("{} inputs are not supported (float only)", t.dtype())))
    }
}

/// `where(mask, a, b)` for tensors of one shape and kind.
pub fn select(mask: DispatchTensor, a: DispatchTensor, b: DispatchTensor, kind: Kind) -> DispatchTensor {
    match kind {
        Kind::Float => Dispatch::float_mask_where(b, mask, a),
        Kind::Int => Dispatch::int_mask_where(b, mask, a),
        Kind::Bool => Dispatch::bool_mask_where(b, mask, a),
    }
}

/// Whether any element of an integer tensor is zero (a small host read of one bool).
pub fn has_zero(t: &Tensor) -> bool {
    let dtype = t.burn_dtype();
    let eq =
        Dispatch::int_equal_elem(t.dispatch().clone(), int_scalar(0, dtype), crate::tensor::bool_for(t.dispatch()));
    let any = Dispatch::bool_any(eq);
    Tensor::from_dispatch(any).to_i64_vec().first().copied().unwrap_or(0) != 0
}

/// Whether a signed integer division `x / y` (same shape) overflows somewhere (`MIN / -1`).
pub fn div_overflows(x: &Tensor, y: &Tensor) -> bool {
    let dtype = x.burn_dtype();
    let min = match dtype {
        DType::I8 => i64::from(i8::MIN),
        DType::I16 => i64::from(i16::MIN),
        DType::I32 => i64::from(i32::MIN),
        DType::I64 => i64::MIN,
        _ => return false,
    };
    let at_min =
        Dispatch::int_equal_elem(x.dispatch().clone(), Scalar::Int(min), crate::tensor::bool_for(x.dispatch()));
    let minus_one =
        Dispatch::int_equal_elem(y.dispatch().clone(), Scalar::Int(-1), crate::tensor::bool_for(y.dispatch()));
    let any = Dispatch::bool_any(Dispatch::bool_and(at_min, minus_one));
    Tensor::from_dispatch(any).to_i64_vec().first().copied().unwrap_or(0) != 0
}

/// A float tensor filled with `v`, with `like`'s shape and dtype.
pub fn float_full_like(like: &DispatchTensor, v: f64) -> DispatchTensor {
    let dtype = like.dtype();
    Dispatch::float_full(like.shape(), Scalar::Float(v), &like.device(), dtype.into())
}
