//! GatherElements: `out[p] = data[p with p[axis] = indices[p]]`, computed as one `select` on the
//! flattened data with exact host-side flat indices (so indices may be smaller than the data
//! on every axis).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, index_tensor, int_input, one, select, shape_err, strides};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("GatherElements", 11, build);
}

struct GatherElements {
    axis: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(GatherElements { axis: node.int("axis", 0)? }))
}

/// Flat positions in `data` addressed by per-element indices along `ax` (ScatterElements too).
pub fn flat_positions(
    ctx: &KernelContext<'_>,
    data: &[usize],
    ishape: &[usize],
    idx: &[i64],
    ax: usize,
) -> Result<Vec<i64>> {
    if ishape.len() != data.len() || ishape.iter().zip(data).enumerate().any(|(i, (a, b))| i != ax && a > b) {
        return Err(shape_err(ctx, data, ishape, "indices do not fit the data"));
    }
    let ds = strides(data);
    let is = strides(ishape);
    let dim = data[ax] as i64;
    let mut out = Vec::with_capacity(idx.len());
    for (p, &v) in idx.iter().enumerate() {
        let v = if v < 0 { v + dim } else { v };
        if !(0..dim).contains(&v) {
            return Err(ctx.err(format!("index {v} is out of range for a dimension of size {dim}")));
        }
        let mut flat = 0usize;
        for k in 0..data.len() {
            let c = if k == ax { v as usize } else { (p / is[k]) % ishape[k] };
            flat += c * ds[k];
        }
        out.push(flat as i64);
    }
    Ok(out)
}

impl Kernel for GatherElements {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, i) = (ins.tensor(0)?, ins.tensor(1)?);
        let s = x.shape();
        let ax = axis(ctx, self.axis, s.len())?;
        let ishape = i.shape();
        let idx = int_input(ctx, &i, "indices")?;
        let flat = flat_positions(ctx, &s, &ishape, &idx, ax)?;
        if flat.is_empty() {
            return one(empty(&ishape, x.dtype(), ctx.device)?);
        }
        let n = x.numel();
        let picked = select(x.reshape(&[n]), 0, &index_tensor(flat, ctx.device))?;
        one(picked.reshape(&ishape))
    }
}
