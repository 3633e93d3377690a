//! SplitToSequence: splits a tensor along `axis` into a sequence, by a chunk size (scalar
//! `split`), by chunk lengths (1-D `split`), or into single entries (no `split`; `keepdims`
//! decides whether the split axis stays).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{narrow, one, take};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, normalize_axis};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SplitToSequence", 11, build);
}

struct SplitToSequence {
    axis: i64,
    keepdims: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let axis = node.int("axis", 0)?;
    let keepdims = node.int("keepdims", 1)? != 0;
    Ok(Box::new(SplitToSequence { axis, keepdims }))
}

impl Kernel for SplitToSequence {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let split = ins.opt_tensor(1)?;
        let rank = x.rank();
        let axis = normalize_axis(self.axis, rank)
            .filter(|_| rank > 0)
            .ok_or_else(|| ctx.err(format!("axis {} is out of range for rank {rank}", self.axis)))?;
        let dim = x.shape()[axis];
        let Some(split) = split else {
            let parts = (0..dim)
                .map(|i| if self.keepdims { narrow(x.clone(), axis, i, i + 1) } else { take(x.clone(), axis, i) })
                .collect();
            return one(Value::Sequence(parts));
        };
        if split.kind() != Kind::Int || split.rank() > 1 {
            return Err(ctx.err(format!(
                "split must be an integer scalar or 1-D tensor, not {} {:?}",
                split.dtype(),
                split.shape()
            )));
        }
        let values = split.to_i64_vec();
        if values.iter().any(|&v| v < 0) {
            return Err(ctx.err(format!("split lengths must not be negative: {values:?}")));
        }
        let lengths: Vec<usize> = if split.rank() == 0 {
            let size = values.first().copied().unwrap_or(0) as usize;
            if size == 0 {
                return Err(ctx.err("the split size must be positive"));
            }
            (0..dim).step_by(size).map(|s| size.min(dim - s)).collect()
        } else {
            let lengths: Vec<usize> = values.iter().map(|&v| v as usize).collect();
            if values.iter().map(|&v| i128::from(v)).sum::<i128>() != dim as i128 {
                return Err(ctx.err(format!("split lengths {values:?} do not add up to the axis size {dim}")));
            }
            lengths
        };
        let mut start = 0;
        let mut parts = Vec::with_capacity(lengths.len());
        for len in lengths {
            parts.push(narrow(x.clone(), axis, start, start + len));
            start += len;
        }
        one(Value::Sequence(parts))
    }
}
