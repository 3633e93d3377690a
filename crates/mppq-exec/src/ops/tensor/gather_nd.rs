//! GatherND (with `batch_dims`): picks slices addressed by index tuples, as one `select` on the
//! data viewed as rows of the non-indexed trailing dimensions.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{empty, index_tensor, int_input, numel, one, select, shape_err, strides};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("GatherND", 11, build);
}

struct GatherNd {
    batch_dims: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let b = node.int("batch_dims", 0)?;
    let batch_dims = usize::try_from(b).map_err(|_| node.err(format!("batch_dims {b} is negative")))?;
    Ok(Box::new(GatherNd { batch_dims }))
}

/// Row numbers (in the data viewed as `[prod(data[..b+k]), data[b+k..]]`) addressed by the
/// index tuples (ScatterND uses it with `b = 0`), and `k`.
pub fn rows(
    ctx: &KernelContext<'_>,
    data: &[usize],
    ishape: &[usize],
    idx: &[i64],
    b: usize,
) -> Result<(Vec<i64>, usize)> {
    let q = ishape.len();
    let r = data.len();
    let Some(&k) = ishape.last() else {
        return Err(ctx.err("indices must have rank >= 1"));
    };
    if b >= q || b >= r || k + b > r || ishape[..b] != data[..b] {
        return Err(shape_err(ctx, data, ishape, "indices do not fit the data"));
    }
    let tuples = numel(ctx, &ishape[..q - 1])?;
    let per_batch = numel(ctx, &ishape[b..q - 1])?;
    let block = &data[b..b + k];
    let bs = strides(block);
    let block_rows = numel(ctx, block)?;
    let mut out = Vec::with_capacity(tuples);
    for n in 0..tuples {
        let mut row = (n / per_batch.max(1)) * block_rows;
        for j in 0..k {
            let d = block[j] as i64;
            let v = idx[n * k + j];
            let v = if v < 0 { v + d } else { v };
            if !(0..d).contains(&v) {
                return Err(ctx.err(format!("index {v} is out of range for a dimension of size {d}")));
            }
            row += v as usize * bs[j];
        }
        out.push(row as i64);
    }
    Ok((out, k))
}

impl Kernel for GatherNd {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, i) = (ins.tensor(0)?, ins.tensor(1)?);
        let s = x.shape();
        let ishape = i.shape();
        let idx = int_input(ctx, &i, "indices")?;
        let b = self.batch_dims;
        let (rows, k) = rows(ctx, &s, &ishape, &idx, b)?;
        let mut out: Vec<usize> = ishape[..ishape.len() - 1].to_vec();
        out.extend_from_slice(&s[b + k..]);
        if rows.is_empty() || out.contains(&0) {
            return one(empty(&out, x.dtype(), ctx.device)?);
        }
        let mut view = vec![numel(ctx, &s[..b + k])?];
        view.extend_from_slice(&s[b + k..]);
        let picked = select(x.reshape(&view), 0, &index_tensor(rows, ctx.device))?;
        one(picked.reshape(&out))
    }
}
