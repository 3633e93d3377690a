//! Tile: repeats a tensor along each axis (`repeats` input), as one broadcast and one reshape.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{dims, empty, int_input, numel, one};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Tile", 6, build);
}

struct Tile;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Tile))
}

impl Kernel for Tile {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let reps = dims(ctx, &int_input(ctx, &ins.tensor(1)?, "repeats")?, "repeats")?;
        let s = x.shape();
        if reps.len() != s.len() {
            return Err(ctx.err(format!("repeats has {} entries for a tensor of rank {}", reps.len(), s.len())));
        }
        let out: Vec<usize> = s.iter().zip(&reps).map(|(d, r)| d * r).collect();
        if numel(ctx, &out)? == 0 {
            return one(empty(&out, x.dtype(), ctx.device)?);
        }
        if reps.iter().all(|&r| r == 1) {
            return one(x);
        }
        // [d0, d1, ..] -> [1, d0, 1, d1, ..] -> [r0, d0, r1, d1, ..] -> [r0*d0, r1*d1, ..]
        let lifted: Vec<usize> = s.iter().flat_map(|&d| [1, d]).collect();
        let wide: Vec<usize> = s.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
        one(x.reshape(&lifted).expand(&wide).reshape(&out))
    }
}
