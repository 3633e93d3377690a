//! Gather: picks entries along an axis by an index tensor of any rank (negative indices count
//! from the end), as one `select` on the flattened indices.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, index_tensor, int_input, one, select, wrap_indices};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Gather", 1, build);
}

struct Gather {
    axis: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Gather { axis: node.int("axis", 0)? }))
}

impl Kernel for Gather {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, i) = (ins.tensor(0)?, ins.tensor(1)?);
        let s = x.shape();
        let ax = axis(ctx, self.axis, s.len())?;
        let ishape = i.shape();
        let mut idx = int_input(ctx, &i, "indices")?;
        wrap_indices(ctx, &mut idx, s[ax])?;
        let mut out: Vec<usize> = s[..ax].to_vec();
        out.extend_from_slice(&ishape);
        out.extend_from_slice(&s[ax + 1..]);
        if idx.is_empty() || out.contains(&0) {
            return one(empty(&out, x.dtype(), ctx.device)?);
        }
        let picked = select(x, ax, &index_tensor(idx, ctx.device))?;
        one(super::reshape::reshape(picked, &out))
    }
}
