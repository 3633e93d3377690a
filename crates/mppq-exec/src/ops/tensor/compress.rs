//! Compress: keeps the slices along an axis (or of the flattened tensor) where a boolean
//! condition is true, as one `select`.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, index_tensor, one, select};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Compress", 9, build);
}

struct Compress {
    axis: Option<i64>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Compress { axis: if node.has("axis") { Some(node.int("axis", 0)?) } else { None } }))
}

impl Kernel for Compress {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, c) = (ins.tensor(0)?, ins.tensor(1)?);
        let (x, ax) = match self.axis {
            Some(a) => {
                let ax = axis(ctx, a, x.rank())?;
                (x, ax)
            }
            None => {
                let n = x.numel();
                (x.reshape(&[n]), 0)
            }
        };
        let d = x.shape()[ax];
        let cond = c.to_f64_vec();
        if cond.len() > d {
            return Err(ctx.err(format!("condition has {} entries for an axis of {d}", cond.len())));
        }
        let idx: Vec<i64> = cond.iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(i, _)| i as i64).collect();
        let mut out = x.shape();
        out[ax] = idx.len();
        if idx.is_empty() || out.contains(&0) {
            return one(empty(&out, x.dtype(), ctx.device)?);
        }
        one(select(x, ax, &index_tensor(idx, ctx.device))?)
    }
}
