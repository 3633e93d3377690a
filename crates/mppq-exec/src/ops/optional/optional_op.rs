//! Optional, OptionalHasElement and OptionalGetElement: wrapping a value into an optional,
//! testing it, and unwrapping it (from opset 18 the last two also accept a plain tensor or
//! sequence, and OptionalHasElement an omitted input).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::one;
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Optional", 15, build_optional);
    r.register_fn("OptionalHasElement", 15, build_has);
    r.register_fn("OptionalGetElement", 15, build_get);
}

/// Optional: `Some(input)`, or an empty optional (of the `type` attribute) without input.
struct MakeOptional;

fn build_optional(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let has_input = node.op.inputs().first().is_some_and(Option::is_some);
    if !has_input && !node.has("type") {
        return Err(node.err("an Optional without input needs the `type` attribute"));
    }
    Ok(Box::new(MakeOptional))
}

impl Kernel for MakeOptional {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        match ctx.inputs(inputs).value(0) {
            Some(Value::Optional(_)) => Err(ctx.err("the input must be a tensor or a sequence, not an optional")),
            Some(v) => one(Value::Optional(Some(Box::new(v)))),
            None => one(Value::Optional(None)),
        }
    }
}

/// OptionalHasElement: a bool scalar.
struct HasElement {
    opset: i64,
}

fn build_has(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(HasElement { opset: node.opset }))
}

impl Kernel for HasElement {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let has = match ctx.inputs(inputs).value(0) {
            Some(Value::Optional(v)) => v.is_some(),
            // A plain tensor or sequence counts as present (opset 18 allows it explicitly;
            // earlier, an optional-typed loop-carried value can arrive unwrapped).
            Some(_) => true,
            None if self.opset >= 18 => false,
            None => return Err(ctx.err("the input is required (before opset 18)")),
        };
        one(Value::Tensor(Tensor::from_bool(&[], vec![has], ctx.device)))
    }
}

/// OptionalGetElement: the wrapped value; an empty optional is an error.
struct GetElement;

fn build_get(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(GetElement))
}

impl Kernel for GetElement {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        match ctx.inputs(inputs).value(0) {
            Some(Value::Optional(Some(v))) => one(*v),
            Some(Value::Optional(None)) => Err(ctx.err("the optional input is empty")),
            // A plain tensor or sequence is its own element (explicit from opset 18 on).
            Some(v) => one(v),
            None => Err(ctx.err("input 0 is required")),
        }
    }
}
