//! SequenceInsert: a copy of a sequence with a tensor inserted at a position (default: the end).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{one, position, sequence};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceInsert", 11, build);
}

struct SequenceInsert;

fn build(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(SequenceInsert))
}

impl Kernel for SequenceInsert {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let mut seq = sequence(ctx, &mut ins, 0)?;
        let t = ins.tensor(1)?;
        if let Some(first) = seq.first()
            && first.dtype() != t.dtype()
        {
            return Err(ctx.err(format!("cannot insert a {} tensor into a sequence of {}", t.dtype(), first.dtype())));
        }
        let p = match ins.opt_tensor(2)? {
            Some(pos) => position(ctx, &pos, seq.len(), true)?,
            None => seq.len(),
        };
        seq.insert(p, t);
        one(Value::Sequence(seq))
    }
}
