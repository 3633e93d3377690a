//! ScatterND (reduction none/add/mul/max/min): writes update slices into a copy of the data at
//! index tuples, as one select-assign on the data viewed as rows.

use super::gather_nd::rows;
use super::scatter_elements::reduction;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{index_tensor, int_input, numel, one, select_assign, shape_err};
use crate::registry::OpRegistry;
use crate::value::Value;
use burn::tensor::IndexingUpdateOp;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ScatterND", 11, build);
}

struct ScatterNd {
    op: IndexingUpdateOp,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(ScatterNd { op: reduction(node)? }))
}

impl Kernel for ScatterNd {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, i, u) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        let s = x.shape();
        let ishape = i.shape();
        if u.dtype() != x.dtype() {
            return Err(ctx.err(format!("updates are {} but data is {}", u.dtype(), x.dtype())));
        }
        let idx = int_input(ctx, &i, "indices")?;
        let (rows, k) = rows(ctx, &s, &ishape, &idx, 0)?;
        let mut ushape: Vec<usize> = ishape[..ishape.len() - 1].to_vec();
        ushape.extend_from_slice(&s[k..]);
        if u.shape() != ushape {
            return Err(shape_err(ctx, &ushape, &u.shape(), "updates do not have the expected shape"));
        }
        if rows.is_empty() || x.numel() == 0 {
            return one(x);
        }
        let mut view = vec![numel(ctx, &s[..k])?];
        view.extend_from_slice(&s[k..]);
        let mut uview = vec![rows.len()];
        uview.extend_from_slice(&s[k..]);
        let y = select_assign(x.reshape(&view), 0, &index_tensor(rows, ctx.device), u.reshape(&uview), self.op)?;
        one(y.reshape(&s))
    }
}
