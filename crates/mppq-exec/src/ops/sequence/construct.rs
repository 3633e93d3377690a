//! SequenceConstruct: a sequence of the input tensors (all of one element type).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::one;
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceConstruct", 11, build);
}

struct SequenceConstruct;

fn build(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(SequenceConstruct))
}

impl Kernel for SequenceConstruct {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let tensors = ctx.inputs(inputs).rest(0)?;
        if let Some(first) = tensors.first()
            && let Some(bad) = tensors.iter().find(|t| t.dtype() != first.dtype())
        {
            return Err(ctx.err(format!("all inputs must have one type: {} and {}", first.dtype(), bad.dtype())));
        }
        one(Value::Sequence(tensors))
    }
}
