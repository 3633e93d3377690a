//! Clip (float and integer): bounds are the `min`/`max` attributes before opset 11 and optional
//! scalar inputs from opset 11 on. Applied as `min(max(x, lo), hi)`, so `lo > hi` gives `hi`
//! everywhere (as numpy and ONNX Runtime do).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{int_scalar, one};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::Scalar;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Clip", 1, build);
}

struct Clip {
    /// Attribute bounds (opset < 11); `None` = read the inputs.
    attrs: Option<(f64, f64)>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let attrs = if node.opset < 11 {
        let lo = if node.has("min") { f64::from(node.float("min", 0.0)?) } else { f64::NEG_INFINITY };
        let hi = if node.has("max") { f64::from(node.float("max", 0.0)?) } else { f64::INFINITY };
        Some((lo, hi))
    } else {
        None
    };
    Ok(Box::new(Clip { attrs }))
}

/// A bound input: must be a one-element tensor of the input's type.
fn bound(ctx: &KernelContext<'_>, x: &Tensor, b: Option<Tensor>, which: &str) -> Result<Option<Tensor>> {
    let Some(b) = b else { return Ok(None) };
    if b.numel() != 1 {
        return Err(ctx.err(format!("{which} must be a scalar, got shape {:?}", b.shape())));
    }
    if b.dtype() != x.dtype() {
        return Err(ctx.err(format!("{which} has type {} but the input has {}", b.dtype(), x.dtype())));
    }
    Ok(Some(b))
}

impl Kernel for Clip {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let dtype = x.burn_dtype();
        match x.kind() {
            Kind::Float => {
                let (lo, hi) = match self.attrs {
                    Some(b) => (Some(b.0).filter(|v| v.is_finite()), Some(b.1).filter(|v| v.is_finite())),
                    None => {
                        let lo = bound(ctx, &x, ins.opt_tensor(1)?, "min")?;
                        let hi = bound(ctx, &x, ins.opt_tensor(2)?, "max")?;
                        let first = |t: Tensor| t.to_f64_vec().first().copied();
                        (lo.and_then(first), hi.and_then(first))
                    }
                };
                let mut y = x.into_dispatch();
                if let Some(lo) = lo {
                    y = Dispatch::float_clamp_min(y, Scalar::Float(lo));
                }
                if let Some(hi) = hi {
                    y = Dispatch::float_clamp_max(y, Scalar::Float(hi));
                }
                one(y)
            }
            Kind::Int => {
                if self.attrs.is_some() {
                    return Err(ctx.err("integer inputs need opset 12 or later"));
                }
                let lo = bound(ctx, &x, ins.opt_tensor(1)?, "min")?;
                let hi = bound(ctx, &x, ins.opt_tensor(2)?, "max")?;
                let first = |t: Tensor| t.to_i64_vec().first().copied();
                let mut y = x.into_dispatch();
                if let Some(lo) = lo.and_then(first) {
                    y = Dispatch::int_clamp_min(y, int_scalar(lo, dtype));
                }
                if let Some(hi) = hi.and_then(first) {
                    y = Dispatch::int_clamp_max(y, int_scalar(hi, dtype));
                }
                one(y)
            }
            Kind::Bool => Err(ctx.err("boolean inputs are not supported")),
        }
    }
}
