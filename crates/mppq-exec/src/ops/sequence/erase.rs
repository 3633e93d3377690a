//! SequenceErase: a copy of a sequence without the tensor at a position (default: the last).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{one, position, sequence};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceErase", 11, build);
}

struct SequenceErase;

fn build(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(SequenceErase))
}

impl Kernel for SequenceErase {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let mut seq = sequence(ctx, &mut ins, 0)?;
        if seq.is_empty() {
            return Err(ctx.err("cannot erase from an empty sequence"));
        }
        let p = match ins.opt_tensor(1)? {
            Some(pos) => position(ctx, &pos, seq.len(), false)?,
            None => seq.len() - 1,
        };
        seq.remove(p);
        one(Value::Sequence(seq))
    }
}
