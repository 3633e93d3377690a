//! MatMul: numpy-style matrix product with broadcast batch dimensions and 1-d operands
//! (float and integer), on Burn's matmul.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::shape_err;
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor, broadcast_shapes};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MatMul", 1, build);
}

struct MatMul;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(MatMul))
}

/// `a @ b` with numpy semantics; shapes and types are checked first.
pub fn matmul(ctx: &KernelContext<'_>, a: Tensor, b: Tensor) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!("operands have different types: {} and {}", a.dtype(), b.dtype())));
    }
    if a.kind() == Kind::Bool {
        return Err(ctx.err("boolean operands are not allowed"));
    }
    let (sa, sb) = (a.shape(), b.shape());
    if sa.is_empty() || sb.is_empty() {
        return Err(shape_err(ctx, sa, sb, "scalars cannot be multiplied as matrices"));
    }
    let mut a_shape = sa.clone();
    if sa.len() == 1 {
        a_shape.insert(0, 1);
    }
    let mut b_shape = sb.clone();
    if sb.len() == 1 {
        b_shape.push(1);
    }
    let (n, k) = (a_shape[a_shape.len() - 2], a_shape[a_shape.len() - 1]);
    let (k2, m) = (b_shape[b_shape.len() - 2], b_shape[b_shape.len() - 1]);
    if k != k2 {
        return Err(shape_err(ctx, sa, sb, "inner dimensions differ"));
    }
    let Some(batch) = broadcast_shapes(&a_shape[..a_shape.len() - 2], &b_shape[..b_shape.len() - 2]) else {
        return Err(shape_err(ctx, sa, sb, "batch dimensions do not broadcast"));
    };
    // The broadcast operands and the product are allocated in full: the largest must fit the budget.
    let largest = (n.saturating_mul(k)).max(k.saturating_mul(m)).max(n.saturating_mul(m));
    let full: Vec<usize> = batch.iter().copied().chain([largest]).collect();
    crate::budget::check(&full, 4).map_err(|message| shape_err(ctx, sa.clone(), sb.clone(), &message))?;
    let lift = |t: Tensor, own: &[usize], rows: usize, cols: usize| {
        let mut lifted = vec![1; batch.len() + 2 - own.len()];
        lifted.extend_from_slice(own);
        let mut full = batch.clone();
        full.extend([rows, cols]);
        t.reshape(&lifted).expand(&full)
    };
    let kind = a.kind();
    let a = lift(a, &a_shape, n, k).into_dispatch();
    let b = lift(b, &b_shape, k, m).into_dispatch();
    let y = match kind {
        Kind::Float => Dispatch::float_matmul(a, b),
        _ => Dispatch::int_matmul(a, b),
    };
    let mut out = batch;
    if sa.len() > 1 {
        out.push(n);
    }
    if sb.len() > 1 {
        out.push(m);
    }
    Ok(Tensor::from_dispatch(y).reshape(&out))
}

impl Kernel for MatMul {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
        Ok(vec![Some(matmul(ctx, a, b)?.into())])
    }
}
