//! Float classification, giving bool tensors: IsNaN, and IsInf (`detect_positive`,
//! `detect_negative`).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{need_float, one};
use crate::registry::OpRegistry;
use crate::value::Value;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::Scalar;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("IsNaN", 9, build);
    r.register_fn("IsInf", 10, build);
}

enum Check {
    NaN,
    Inf { positive: bool, negative: bool },
}

struct Classify(Check);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Classify(if node.op.op_type == "IsNaN" {
        Check::NaN
    } else {
        Check::Inf { positive: node.int("detect_positive", 1)? != 0, negative: node.int("detect_negative", 1)? != 0 }
    })))
}

impl Kernel for Classify {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        need_float(ctx, &x)?;
        let x = x.into_dispatch();
        let bd = crate::tensor::bool_for(&x);
        one(match self.0 {
            Check::NaN => Dispatch::float_is_nan(x, bd),
            Check::Inf { positive: true, negative: true } => Dispatch::float_is_inf(x, bd),
            Check::Inf { positive: true, negative: false } => {
                Dispatch::float_equal_elem(x, Scalar::Float(f64::INFINITY), bd)
            }
            Check::Inf { positive: false, negative: true } => {
                Dispatch::float_equal_elem(x, Scalar::Float(f64::NEG_INFINITY), bd)
            }
            Check::Inf { positive: false, negative: false } => Dispatch::bool_zeros(x.shape(), &x.device(), bd),
        })
    }
}
