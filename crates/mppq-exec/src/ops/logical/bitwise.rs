//! Bitwise operators on integers with numpy broadcasting: BitShift (`direction` LEFT/RIGHT),
//! BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{align_binary, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::IntTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("BitShift", 11, build);
    for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"] {
        r.register_fn(op, 18, build);
    }
}

#[derive(Clone, Copy)]
enum Op {
    Left,
    Right,
    And,
    Or,
    Xor,
    Not,
}

struct Bitwise(Op);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = match node.op.op_type.as_str() {
        "BitShift" => match node.string("direction", "")?.as_str() {
            "LEFT" => Op::Left,
            "RIGHT" => Op::Right,
            other => return Err(node.err(format!("direction must be LEFT or RIGHT, got `{other}`"))),
        },
        "BitwiseAnd" => Op::And,
        "BitwiseOr" => Op::Or,
        "BitwiseXor" => Op::Xor,
        _ => Op::Not,
    };
    Ok(Box::new(Bitwise(op)))
}

impl Kernel for Bitwise {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let a = ins.tensor(0)?;
        if a.kind() != Kind::Int {
            return Err(ctx.err(format!("{} inputs are not supported (integers only)", a.dtype())));
        }
        if let Op::Not = self.0 {
            let shape = a.shape();
            return one_shaped(Dispatch::bitwise_not(a.into_dispatch()), &shape);
        }
        let (a, b, shape) = align_binary(ctx, a, ins.tensor(1)?)?;
        let (x, y) = (a.into_dispatch(), b.into_dispatch());
        one_shaped(
            match self.0 {
                Op::Left => Dispatch::bitwise_left_shift(x, y),
                Op::Right => Dispatch::bitwise_right_shift(x, y),
                Op::And => Dispatch::bitwise_and(x, y),
                Op::Or => Dispatch::bitwise_or(x, y),
                _ => Dispatch::bitwise_xor(x, y),
            },
            &shape,
        )
    }
}
