//! Boolean logic with numpy broadcasting: And, Or, Xor, and Not.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{Legacy, align_binary, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::BoolTensorOps;

pub fn register(r: &mut OpRegistry) {
    for op in ["And", "Or", "Xor", "Not"] {
        r.register_fn(op, 1, build);
    }
}

#[derive(Clone, Copy)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

struct Logic {
    op: Op,
    legacy: Legacy,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = match node.op.op_type.as_str() {
        "And" => Op::And,
        "Or" => Op::Or,
        "Xor" => Op::Xor,
        _ => Op::Not,
    };
    Ok(Box::new(Logic { op, legacy: Legacy::parse(node)? }))
}

impl Kernel for Logic {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let a = ins.tensor(0)?;
        if a.kind() != Kind::Bool {
            return Err(ctx.err(format!("{} inputs are not supported (bool only)", a.dtype())));
        }
        if let Op::Not = self.op {
            let shape = a.shape();
            return one_shaped(Dispatch::bool_not(a.into_dispatch()), &shape);
        }
        let b = ins.tensor(1)?;
        let b = self.legacy.apply(ctx, &a, b)?;
        let (a, b, shape) = align_binary(ctx, a, b)?;
        let (x, y) = (a.into_dispatch(), b.into_dispatch());
        one_shaped(
            match self.op {
                Op::And => Dispatch::bool_and(x, y),
                Op::Or => Dispatch::bool_or(x, y),
                _ => Dispatch::bool_xor(x, y),
            },
            &shape,
        )
    }
}
