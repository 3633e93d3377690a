//! Float activations composed from Burn primitives, with their attributes parsed at build time:
//! LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign, Mish, Gelu
//! (`approximate` none/tanh), ThresholdedRelu, Shrink.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{float_full_like, need_float, one};
use crate::registry::OpRegistry;
use crate::value::Value;
use burn::backend::ops::{ActivationOps, FloatTensorOps};
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;

pub fn register(r: &mut OpRegistry) {
    for (op, since) in [
        ("LeakyRelu", 1),
        ("Elu", 1),
        ("Selu", 1),
        ("Celu", 12),
        ("HardSigmoid", 1),
        ("HardSwish", 14),
        ("Softplus", 1),
        ("Softsign", 1),
        ("Mish", 18),
        ("Gelu", 20),
        ("ThresholdedRelu", 10),
        ("Shrink", 9),
    ] {
        r.register_fn(op, since, build);
    }
}

#[derive(Clone, Copy, Debug)]
enum Act {
    LeakyRelu { alpha: f64 },
    Elu { alpha: f64 },
    Selu { alpha: f64, gamma: f64 },
    Celu { alpha: f64 },
    HardSigmoid { alpha: f64, beta: f64 },
    HardSwish,
    Softplus,
    Softsign,
    Mish,
    Gelu { tanh: bool },
    ThresholdedRelu { alpha: f64 },
    Shrink { bias: f64, lambd: f64 },
}

struct Activation(Act);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let f = |name: &str, default: f32| node.float(name, default).map(f64::from);
    let act = match node.op.op_type.as_str() {
        "LeakyRelu" => Act::LeakyRelu { alpha: f("alpha", 0.01)? },
        "Elu" => Act::Elu { alpha: f("alpha", 1.0)? },
        "Selu" => Act::Selu { alpha: f("alpha", 1.673_263_2)?, gamma: f("gamma", 1.050_701)? },
        "Celu" => {
            let alpha = f("alpha", 1.0)?;
            if alpha == 0.0 {
                return Err(node.err("alpha must not be 0"));
            }
            Act::Celu { alpha }
        }
        "HardSigmoid" => Act::HardSigmoid { alpha: f("alpha", 0.2)?, beta: f("beta", 0.5)? },
        "HardSwish" => Act::HardSwish,
        "Softplus" => Act::Softplus,
        "Softsign" => Act::Softsign,
        "Mish" => Act::Mish,
        "Gelu" => match node.string("approximate", "none")?.as_str() {
            "none" => Act::Gelu { tanh: false },
            "tanh" => Act::Gelu { tanh: true },
            other => return Err(node.err(format!("unknown approximate `{other}`"))),
        },
        "ThresholdedRelu" => Act::ThresholdedRelu { alpha: f("alpha", 1.0)? },
        _ => Act::Shrink { bias: f("bias", 0.0)?, lambd: f("lambd", 0.5)? },
    };
    Ok(Box::new(Activation(act)))
}

fn s(v: f64) -> Scalar {
    Scalar::Float(v)
}

fn muls(x: DispatchTensor, v: f64) -> DispatchTensor {
    Dispatch::float_mul_scalar(x, s(v))
}

fn adds(x: DispatchTensor, v: f64) -> DispatchTensor {
    Dispatch::float_add_scalar(x, s(v))
}

/// `exp(x) - 1`.
fn expm1(x: DispatchTensor) -> DispatchTensor {
    adds(Dispatch::float_exp(x), -1.0)
}

/// `where(mask, a, b)`.
fn pick(mask: DispatchTensor, a: DispatchTensor, b: DispatchTensor) -> DispatchTensor {
    Dispatch::float_mask_where(b, mask, a)
}

fn hard_sigmoid(x: DispatchTensor, alpha: f64, beta: f64) -> DispatchTensor {
    Dispatch::float_clamp_max(Dispatch::float_clamp_min(adds(muls(x, alpha), beta), s(0.0)), s(1.0))
}

/// `log(1 + exp(x))`, stable: `relu(x) + log1p(exp(-|x|))`.
fn softplus(x: DispatchTensor) -> DispatchTensor {
    let tail = Dispatch::float_log1p(Dispatch::float_exp(Dispatch::float_neg(Dispatch::float_abs(x.clone()))));
    Dispatch::float_add(Dispatch::relu(x), tail)
}

fn apply(act: Act, x: DispatchTensor) -> DispatchTensor {
    match act {
        Act::LeakyRelu { alpha } => Dispatch::leaky_relu(x, s(alpha)),
        Act::Elu { alpha } => {
            let mask = Dispatch::float_lower_elem(x.clone(), s(0.0), crate::tensor::bool_for(&x));
            pick(mask, muls(expm1(x.clone()), alpha), x)
        }
        Act::Selu { alpha, gamma } => {
            let mask = Dispatch::float_lower_equal_elem(x.clone(), s(0.0), crate::tensor::bool_for(&x));
            pick(mask, muls(expm1(x.clone()), alpha * gamma), muls(x, gamma))
        }
        Act::Celu { alpha } => {
            let neg = Dispatch::float_clamp_max(muls(expm1(muls(x.clone(), 1.0 / alpha)), alpha), s(0.0));
            Dispatch::float_add(Dispatch::relu(x), neg)
        }
        Act::HardSigmoid { alpha, beta } => hard_sigmoid(x, alpha, beta),
        Act::HardSwish => Dispatch::float_mul(x.clone(), hard_sigmoid(x, 1.0 / 6.0, 0.5)),
        Act::Softplus => softplus(x),
        Act::Softsign => Dispatch::float_div(x.clone(), adds(Dispatch::float_abs(x), 1.0)),
        Act::Mish => Dispatch::float_mul(x.clone(), Dispatch::float_tanh(softplus(x))),
        Act::Gelu { tanh: false } => {
            let e = Dispatch::float_erf(muls(x.clone(), std::f64::consts::FRAC_1_SQRT_2));
            Dispatch::float_mul(muls(x, 0.5), adds(e, 1.0))
        }
        Act::Gelu { tanh: true } => {
            let cube = Dispatch::float_mul(Dispatch::float_mul(x.clone(), x.clone()), x.clone());
            let inner = muls(Dispatch::float_add(x.clone(), muls(cube, 0.044715)), (2.0 / std::f64::consts::PI).sqrt());
            Dispatch::float_mul(muls(x, 0.5), adds(Dispatch::float_tanh(inner), 1.0))
        }
        Act::ThresholdedRelu { alpha } => {
            let mask = Dispatch::float_greater_elem(x.clone(), s(alpha), crate::tensor::bool_for(&x));
            let zero = float_full_like(&x, 0.0);
            pick(mask, x, zero)
        }
        Act::Shrink { bias, lambd } => {
            let low = Dispatch::float_lower_elem(x.clone(), s(-lambd), crate::tensor::bool_for(&x));
            let high = Dispatch::float_greater_elem(x.clone(), s(lambd), crate::tensor::bool_for(&x));
            let zero = float_full_like(&x, 0.0);
            let y = pick(high, adds(x.clone(), -bias), zero);
            pick(low, adds(x, bias), y)
        }
    }
}

impl Kernel for Activation {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        need_float(ctx, &x)?;
        // LeakyRelu on CPU float32: one vectorized pass (Burn's went through strided iterators).
        if let Act::LeakyRelu { alpha } = self.0 {
            let alpha = alpha as f32;
            if let Some(y) = crate::cpu::elementwise::try_unary(&x, |v| if v < 0.0 { v * alpha } else { v }) {
                return Ok(vec![Some(y.into())]);
            }
        }
        one(apply(self.0, x.into_dispatch()))
    }
}
