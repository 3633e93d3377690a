//! SequenceEmpty: an empty sequence (the `dtype` attribute names its element type).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::one;
use crate::registry::OpRegistry;
use crate::value::Value;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceEmpty", 11, build);
}

struct SequenceEmpty;

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    // Default float; the element type is only checked here: an empty sequence carries none.
    let code = node.int("dtype", 1)?;
    i32::try_from(code)
        .ok()
        .and_then(DataType::from_onnx_code)
        .ok_or_else(|| node.err(format!("unknown element type {code}")))?;
    Ok(Box::new(SequenceEmpty))
}

impl Kernel for SequenceEmpty {
    fn run(&self, _: &KernelContext<'_>, _: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        one(Value::Sequence(Vec::new()))
    }
}
