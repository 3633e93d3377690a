//! Comparisons with numpy broadcasting, giving bool tensors: Equal (numbers and bools),
//! Greater, GreaterOrEqual, Less, LessOrEqual.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{self, align_binary, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};

pub fn register(r: &mut OpRegistry) {
    for (op, since) in [("Equal", 1), ("Greater", 1), ("Less", 1), ("GreaterOrEqual", 12), ("LessOrEqual", 12)] {
        r.register_fn(op, since, build);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

struct Compare {
    cmp: Cmp,
    legacy: elementwise::Legacy,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let cmp = match node.op.op_type.as_str() {
        "Equal" => Cmp::Eq,
        "Greater" => Cmp::Gt,
        "GreaterOrEqual" => Cmp::Ge,
        "Less" => Cmp::Lt,
        _ => Cmp::Le,
    };
    Ok(Box::new(Compare { cmp, legacy: elementwise::Legacy::parse(node)? }))
}

impl Kernel for Compare {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
        let b = self.legacy.apply(ctx, &a, b)?;
        let (a, b, shape) = align_binary(ctx, a, b)?;
        let kind = a.kind();
        let (x, y) = (a.into_dispatch(), b.into_dispatch());
        let bd = crate::tensor::bool_for(&x);
        let out = match (kind, self.cmp) {
            (Kind::Float, Cmp::Eq) => Dispatch::float_equal(x, y, bd),
            (Kind::Float, Cmp::Gt) => Dispatch::float_greater(x, y, bd),
            (Kind::Float, Cmp::Ge) => Dispatch::float_greater_equal(x, y, bd),
            (Kind::Float, Cmp::Lt) => Dispatch::float_lower(x, y, bd),
            (Kind::Float, Cmp::Le) => Dispatch::float_lower_equal(x, y, bd),
            (Kind::Int, Cmp::Eq) => Dispatch::int_equal(x, y, bd),
            (Kind::Int, Cmp::Gt) => Dispatch::int_greater(x, y, bd),
            (Kind::Int, Cmp::Ge) => Dispatch::int_greater_equal(x, y, bd),
            (Kind::Int, Cmp::Lt) => Dispatch::int_lower(x, y, bd),
            (Kind::Int, Cmp::Le) => Dispatch::int_lower_equal(x, y, bd),
            (Kind::Bool, Cmp::Eq) => Dispatch::bool_equal(x, y),
            (Kind::Bool, _) => return Err(ctx.err("boolean operands can only be compared for equality")),
        };
        one_shaped(out, &shape)
    }
}
