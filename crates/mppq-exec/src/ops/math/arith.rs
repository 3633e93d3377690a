//! Binary arithmetic with numpy broadcasting (and the opset<7 `broadcast`/`axis` scheme): Add,
//! Sub, Mul, Div (float and integer; integer Div truncates toward zero like ONNX Runtime) and
//! Mod (`fmod=0`: floor modulo, sign of the divisor; `fmod=1`: C fmod, sign of the dividend).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{Legacy, align_binary, div_overflows, has_zero, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::FloatDType;

pub fn register(r: &mut OpRegistry) {
    for op in ["Add", "Sub", "Mul", "Div"] {
        r.register_fn(op, 1, build);
    }
    r.register_fn("Mod", 10, build);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    /// Floor modulo (Python `%`).
    FloorMod,
    /// C `fmod` (truncated remainder).
    Fmod,
}

struct Arith {
    op: Op,
    legacy: Legacy,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = match node.op.op_type.as_str() {
        "Add" => Op::Add,
        "Sub" => Op::Sub,
        "Mul" => Op::Mul,
        "Div" => Op::Div,
        _ => match node.int("fmod", 0)? {
            0 => Op::FloorMod,
            1 => Op::Fmod,
            v => return Err(node.err(format!("fmod must be 0 or 1, got {v}"))),
        },
    };
    Ok(Box::new(Arith { op, legacy: Legacy::parse(node)? }))
}

/// C fmod on floats: `x - y * trunc(x / y)`.
fn float_fmod(x: DispatchTensor, y: DispatchTensor) -> DispatchTensor {
    let q = Dispatch::float_trunc(Dispatch::float_div(x.clone(), y.clone()));
    Dispatch::float_sub(x, Dispatch::float_mul(y, q))
}

impl Kernel for Arith {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
        let b = self.legacy.apply(ctx, &a, b)?;
        // CPU float32: one vectorised pass (Burn's broadcasting zip was 15 % of a PP-OCR
        // detector's quantize time).
        // (Closures, not function pointers: each map is compiled with its operation inlined.)
        use crate::cpu::elementwise::try_binary;
        let quick = match self.op {
            Op::Add => try_binary(&a, &b, |x, y| x + y),
            Op::Sub => try_binary(&a, &b, |x, y| x - y),
            Op::Mul => try_binary(&a, &b, |x, y| x * y),
            Op::Div => try_binary(&a, &b, |x, y| x / y),
            _ => None,
        };
        if let Some(y) = quick {
            return Ok(vec![Some(y.into())]);
        }
        let (a, b, shape) = align_binary(ctx, a, b)?;
        let kind = a.kind();
        if kind == Kind::Int && matches!(self.op, Op::Div | Op::FloorMod | Op::Fmod) && has_zero(&b) {
            return Err(ctx.err("integer division by zero"));
        }
        if kind == Kind::Int && matches!(self.op, Op::Div | Op::Fmod) && div_overflows(&a, &b) {
            return Err(ctx.err("integer division overflows (minimum value divided by -1)"));
        }
        let (x, y) = (a.into_dispatch(), b.into_dispatch());
        let out = match (kind, self.op) {
            (Kind::Float, Op::Add) => Dispatch::float_add(x, y),
            (Kind::Float, Op::Sub) => Dispatch::float_sub(x, y),
            (Kind::Float, Op::Mul) => Dispatch::float_mul(x, y),
            (Kind::Float, Op::Div) => Dispatch::float_div(x, y),
            (Kind::Float, Op::FloorMod) => Dispatch::float_remainder(x, y),
            (Kind::Float, Op::Fmod) => {
                // Half-precision loses too much in the quotient: compute in f32.
                let dtype = x.dtype();
                if dtype.size() < 4 {
                    let r =
                        float_fmod(Dispatch::float_cast(x, FloatDType::F32), Dispatch::float_cast(y, FloatDType::F32));
                    Dispatch::float_cast(r, dtype.into())
                } else {
                    float_fmod(x, y)
                }
            }
            (Kind::Int, Op::Add) => Dispatch::int_add(x, y),
            (Kind::Int, Op::Sub) => Dispatch::int_sub(x, y),
            (Kind::Int, Op::Mul) => Dispatch::int_mul(x, y),
            (Kind::Int, Op::Div) => Dispatch::int_div(x, y),
            (Kind::Int, Op::FloorMod) => Dispatch::int_remainder(x, y),
            (Kind::Int, Op::Fmod) => {
                let q = Dispatch::int_div(x.clone(), y.clone());
                Dispatch::int_sub(x, Dispatch::int_mul(y, q))
            }
            (Kind::Bool, _) => return Err(ctx.err("boolean operands are not allowed")),
        };
        one_shaped(out, &shape)
    }
}
