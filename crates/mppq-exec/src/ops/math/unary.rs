//! Element-wise functions that map one Burn primitive each: Abs, Neg, Sign, Relu (float and
//! integer), Ceil, Floor, Round (half to even), Sqrt, Reciprocal, Exp, Log, Sin, Cos, Tan, Asin,
//! Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erf, Sigmoid, Tanh (float). Sigmoid on float32 CPU
//! tensors is ONNX Runtime's logistic, vectorized.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{int_scalar, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::ops::{ActivationOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};

type Fun = fn(DispatchTensor) -> DispatchTensor;

/// (op type, first opset, float function, integer function if the op is defined on integers)
const OPS: &[(&str, i64, Fun, Option<Fun>)] = &[
    ("Abs", 1, Dispatch::float_abs, Some(Dispatch::int_abs)),
    ("Neg", 1, Dispatch::float_neg, Some(Dispatch::int_neg)),
    ("Sign", 9, Dispatch::float_sign, Some(Dispatch::int_sign)),
    ("Relu", 1, Dispatch::relu, Some(int_relu)),
    ("Ceil", 1, Dispatch::float_ceil, None),
    ("Floor", 1, Dispatch::float_floor, None),
    ("Round", 11, Dispatch::float_round, None),
    ("Sqrt", 1, Dispatch::float_sqrt, None),
    ("Reciprocal", 1, Dispatch::float_recip, None),
    ("Exp", 1, Dispatch::float_exp, None),
    ("Log", 1, Dispatch::float_log, None),
    ("Sin", 7, Dispatch::float_sin, None),
    ("Cos", 7, Dispatch::float_cos, None),
    ("Tan", 7, Dispatch::float_tan, None),
    ("Asin", 7, Dispatch::float_asin, None),
    ("Acos", 7, Dispatch::float_acos, None),
    ("Atan", 7, Dispatch::float_atan, None),
    ("Sinh", 9, Dispatch::float_sinh, None),
    ("Cosh", 9, Dispatch::float_cosh, None),
    ("Asinh", 9, Dispatch::float_asinh, None),
    ("Acosh", 9, Dispatch::float_acosh, None),
    ("Atanh", 9, Dispatch::float_atanh, None),
    ("Erf", 9, Dispatch::float_erf, None),
    ("Sigmoid", 1, Dispatch::sigmoid, None),
    ("Tanh", 1, Dispatch::float_tanh, None),
];

fn int_relu(x: DispatchTensor) -> DispatchTensor {
    let dtype = x.dtype();
    Dispatch::int_clamp_min(x, int_scalar(0, dtype))
}

pub fn register(r: &mut OpRegistry) {
    for (op, since, _, _) in OPS {
        r.register_fn(op, *since, build);
    }
}

struct Unary {
    float: Fun,
    int: Option<Fun>,
    /// Sigmoid: float32 CPU tensors get ONNX Runtime's logistic, vectorized
    /// ([`crate::cpu::elementwise::logistic`]), instead of Burn's scalar `1/(1 + exp(−x))`.
    logistic: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let (_, _, float, int) =
        OPS.iter().find(|(op, ..)| *op == node.op.op_type).ok_or_else(|| node.err("not a unary math operator"))?;
    Ok(Box::new(Unary { float: *float, int: *int, logistic: node.op.op_type == "Sigmoid" }))
}

impl Kernel for Unary {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        if self.logistic
            && let Some(y) = crate::cpu::elementwise::try_unary(&x, crate::cpu::elementwise::logistic)
        {
            return Ok(vec![Some(y.into())]);
        }
        let f = match (x.kind(), self.int) {
            (Kind::Float, _) => self.float,
            (Kind::Int, Some(f)) => f,
            _ => return Err(ctx.err(format!("{} inputs are not supported", x.dtype()))),
        };
        let shape = x.shape();
        one_shaped(f(x.into_dispatch()), &shape)
    }
}
