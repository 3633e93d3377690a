//! SequenceLength: the number of tensors in a sequence, an int64 scalar.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{one, sequence};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceLength", 11, build);
}

struct SequenceLength;

fn build(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(SequenceLength))
}

impl Kernel for SequenceLength {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let seq = sequence(ctx, &mut ctx.inputs(inputs), 0)?;
        one(Value::Tensor(Tensor::from_i64(&[], vec![seq.len() as i64], ctx.device)))
    }
}
