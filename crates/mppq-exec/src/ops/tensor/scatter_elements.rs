//! ScatterElements (reduction none/add/mul/max/min) and its deprecated alias Scatter: writes
//! `updates` into a copy of `data` at per-element indices along an axis, as one scatter on the
//! flattened data with exact host-side flat indices.

use super::gather_elements::flat_positions;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, index_tensor, int_input, one, scatter, shape_err};
use crate::registry::OpRegistry;
use crate::value::Value;
use burn::tensor::IndexingUpdateOp;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ScatterElements", 11, build);
    r.register_fn("Scatter", 9, build);
}

struct ScatterElements {
    axis: i64,
    op: IndexingUpdateOp,
}

/// The `reduction` attribute as a Burn update operation.
pub fn reduction(node: &OpNode<'_>) -> Result<IndexingUpdateOp> {
    Ok(match node.string("reduction", "none")?.as_str() {
        "none" => IndexingUpdateOp::Assign,
        "add" => IndexingUpdateOp::Add,
        "mul" => IndexingUpdateOp::Mul,
        "max" => IndexingUpdateOp::Max,
        "min" => IndexingUpdateOp::Min,
        other => return Err(node.err(format!("unknown reduction `{other}`"))),
    })
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(ScatterElements { axis: node.int("axis", 0)?, op: reduction(node)? }))
}

impl Kernel for ScatterElements {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, i, u) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        let s = x.shape();
        let ax = axis(ctx, self.axis, s.len())?;
        let ishape = i.shape();
        if u.shape() != ishape {
            return Err(shape_err(ctx, &ishape, &u.shape(), "indices and updates differ"));
        }
        if u.dtype() != x.dtype() {
            return Err(ctx.err(format!("updates are {} but data is {}", u.dtype(), x.dtype())));
        }
        let idx = int_input(ctx, &i, "indices")?;
        let flat = flat_positions(ctx, &s, &ishape, &idx, ax)?;
        if flat.is_empty() {
            return one(x);
        }
        let (n, m) = (x.numel(), flat.len());
        let y = scatter(x.reshape(&[n]), 0, &index_tensor(flat, ctx.device), u.reshape(&[m]), self.op)?;
        one(y.reshape(&s))
    }
}
