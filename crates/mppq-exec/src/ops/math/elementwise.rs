//! Element-wise arithmetic with numpy broadcasting: Add, Sub, Mul, Div (float and integer), and
//! the float activations Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs.

use crate::error::{ExecError, Result};
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor, broadcast_pair};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{ActivationOps, FloatTensorOps, IntTensorOps};

pub fn register(r: &mut OpRegistry) {
    for op in ["Add", "Sub", "Mul", "Div"] {
        r.register_fn(op, 1, build_binary);
    }
    for op in ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs"] {
        r.register_fn(op, 1, build_unary);
    }
}

#[derive(Clone, Copy)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

struct Binary(BinOp);

fn build_binary(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    // Opsets < 7 used an explicit `broadcast`/`axis` scheme; numpy broadcasting covers the
    // common cases of it (trailing-axis alignment).
    let op = match node.op.op_type.as_str() {
        "Add" => BinOp::Add,
        "Sub" => BinOp::Sub,
        "Mul" => BinOp::Mul,
        _ => BinOp::Div,
    };
    Ok(Box::new(Binary(op)))
}

/// Checks two operands for a broadcasting binary operation and brings them to equal rank.
pub fn align_binary(ctx: &KernelContext<'_>, a: Tensor, b: Tensor) -> Result<(Tensor, Tensor, Vec<usize>)> {
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!("operands have different types: {} and {}", a.dtype(), b.dtype())));
    }
    broadcast_pair(a, b).map_err(|(left, right)| ExecError::Shape {
        node: ctx.node.to_string(),
        op_type: ctx.op_type.to_string(),
        left,
        right,
        message: "do not broadcast".into(),
    })
}

impl Kernel for Binary {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
        let (a, b, _) = align_binary(ctx, a, b)?;
        let (x, y) = (a.clone().into_dispatch(), b.into_dispatch());
        let out = match (a.kind(), self.0) {
            (Kind::Float, BinOp::Add) => Dispatch::float_add(x, y),
            (Kind::Float, BinOp::Sub) => Dispatch::float_sub(x, y),
            (Kind::Float, BinOp::Mul) => Dispatch::float_mul(x, y),
            (Kind::Float, BinOp::Div) => Dispatch::float_div(x, y),
            (Kind::Int, BinOp::Add) => Dispatch::int_add(x, y),
            (Kind::Int, BinOp::Sub) => Dispatch::int_sub(x, y),
            (Kind::Int, BinOp::Mul) => Dispatch::int_mul(x, y),
            (Kind::Int, BinOp::Div) => Dispatch::int_div(x, y),
            (Kind::Bool, _) => return Err(ctx.err("boolean operands are not allowed")),
        };
        Ok(vec![Some(Tensor::from_dispatch(out).into())])
    }
}

struct Unary(fn(burn::backend::DispatchTensor) -> burn::backend::DispatchTensor);

fn build_unary(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let f: fn(_) -> _ = match node.op.op_type.as_str() {
        "Relu" => Dispatch::relu,
        "Sigmoid" => Dispatch::sigmoid,
        "Tanh" => Dispatch::float_tanh,
        "Exp" => Dispatch::float_exp,
        "Log" => Dispatch::float_log,
        "Sqrt" => Dispatch::float_sqrt,
        "Neg" => Dispatch::float_neg,
        _ => Dispatch::float_abs,
    };
    Ok(Box::new(Unary(f)))
}

impl Kernel for Unary {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        if x.kind() != Kind::Float {
            return Err(ctx.err(format!("{} inputs are not supported", x.dtype())));
        }
        Ok(vec![Some(Tensor::from_dispatch((self.0)(x.into_dispatch())).into())])
    }
}
