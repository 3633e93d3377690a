//! Pow with numpy broadcasting: float base with a float or integer exponent (Burn `powf`), and
//! integer base (computed on the host in f64, then truncated to the base's type, as ONNX
//! Runtime does). The output has the base's type.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{Legacy, align_shapes, one_shaped};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::FloatDType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Pow", 1, build);
}

struct Pow {
    legacy: Legacy,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Pow { legacy: Legacy::parse(node)? }))
}

impl Kernel for Pow {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
        let b = self.legacy.apply(ctx, &a, b)?;
        if a.kind() == Kind::Bool || b.kind() == Kind::Bool {
            return Err(ctx.err("boolean operands are not allowed"));
        }
        let (a, b, shape) = align_shapes(ctx, a, b)?;
        let dtype = a.burn_dtype();
        match a.kind() {
            Kind::Float => {
                let y = match b.kind() {
                    Kind::Float => Dispatch::float_cast(b.into_dispatch(), dtype.into()),
                    _ => Dispatch::int_into_float(b.into_dispatch(), FloatDType::from(dtype)),
                };
                one_shaped(Dispatch::float_powf(a.into_dispatch(), y), &shape)
            }
            _ => {
                // Integer base: small in practice; exact for results below 2^53.
                let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
                let v: Vec<i64> = x.iter().zip(&y).map(|(x, y)| x.powf(*y) as i64).collect();
                let t = Tensor::from_i64(&shape, v, ctx.device).cast(a.dtype())?;
                one_shaped(t.into_dispatch(), &shape)
            }
        }
    }
}
