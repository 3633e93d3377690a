//! ConcatFromSequence: concatenates a sequence's tensors along `axis`, or stacks them along a new
//! axis when `new_axis` is 1.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{one, sequence, stack};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, normalize_axis};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ConcatFromSequence", 11, build);
}

struct ConcatFromSequence {
    axis: i64,
    new_axis: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    if !node.has("axis") {
        return Err(node.err("missing attribute `axis`"));
    }
    let axis = node.int("axis", 0)?;
    let new_axis = match node.int("new_axis", 0)? {
        0 => false,
        1 => true,
        v => return Err(node.err(format!("new_axis must be 0 or 1, not {v}"))),
    };
    Ok(Box::new(ConcatFromSequence { axis, new_axis }))
}

impl Kernel for ConcatFromSequence {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let seq = sequence(ctx, &mut ctx.inputs(inputs), 0)?;
        let Some(first) = seq.first() else { return Err(ctx.err("cannot concatenate an empty sequence")) };
        let rank = first.rank();
        let out_rank = if self.new_axis { rank + 1 } else { rank };
        let axis = normalize_axis(self.axis, out_rank)
            .filter(|_| out_rank > 0)
            .ok_or_else(|| ctx.err(format!("axis {} is out of range for rank {out_rank}", self.axis)))?;
        if self.new_axis {
            return one(Value::Tensor(stack(ctx, seq, axis, "ConcatFromSequence")?));
        }
        let (shape, dtype) = (first.shape(), first.dtype());
        for t in &seq {
            let s = t.shape();
            let same = s.len() == rank && s.iter().zip(&shape).enumerate().all(|(d, (a, b))| d == axis || a == b);
            if !same || t.dtype() != dtype {
                return Err(
                    ctx.err(format!("cannot concatenate {} {s:?} with {dtype} {shape:?} along axis {axis}", t.dtype()))
                );
            }
        }
        one(Value::Tensor(Tensor::cat(seq, axis)))
    }
}
