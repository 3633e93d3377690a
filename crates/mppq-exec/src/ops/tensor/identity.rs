//! Identity: passes any value (tensor, sequence or optional) through.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Identity", 1, build_identity);
}

struct Identity;

fn build_identity(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Identity))
}

impl Kernel for Identity {
    /// The value is passed through.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let v = ctx.inputs(inputs).value(0).ok_or_else(|| ctx.err("input 0 is required"))?;
        Ok(vec![Some(v)])
    }
}
