//! SequenceAt: the tensor at a (possibly negative) position of a sequence.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{one, position, sequence};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceAt", 11, build);
}

struct SequenceAt;

fn build(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(SequenceAt))
}

impl Kernel for SequenceAt {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let mut seq = sequence(ctx, &mut ins, 0)?;
        let p = position(ctx, &ins.tensor(1)?, seq.len(), false)?;
        one(Value::Tensor(seq.swap_remove(p)))
    }
}
