//! DynamicQuantizeLinear: uint8 quantization with scale and zero point computed from the data range.

use super::quantize::quantize_u8;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("DynamicQuantizeLinear", 11, build);
}

struct DynamicQuantize;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(DynamicQuantize))
}

impl Kernel for DynamicQuantize {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        if x.kind() != Kind::Float {
            return Err(ctx.err(format!("{} inputs are not supported", x.dtype())));
        }
        let x = x.cast(DataType::Float)?;
        let (mut lo, mut hi) = (0f32, 0f32);
        if x.numel() > 0 {
            let flat = x.clone().reshape(&[x.numel()]);
            lo = Tensor::from_dispatch(Dispatch::float_min(flat.dispatch().clone()))
                .to_f32_vec()
                .first()
                .copied()
                .unwrap_or(0.0)
                .min(0.0);
            hi = Tensor::from_dispatch(Dispatch::float_max(flat.into_dispatch()))
                .to_f32_vec()
                .first()
                .copied()
                .unwrap_or(0.0)
                .max(0.0);
        }
        let scale = (hi - lo) / 255.0;
        let (y, zp) = if scale > 0.0 && scale.is_finite() {
            let zp = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even();
            (quantize_u8(ctx, &x, scale, zp)?, zp)
        } else {
            (x.zeros_like().cast(DataType::Uint8)?, 0.0)
        };
        let s = Tensor::from_f32(&[], vec![scale], ctx.device);
        let z = Tensor::from_i64(&[], vec![zp as i64], ctx.device).cast(DataType::Uint8)?;
        Ok(vec![Some(y.into()), Some(s.into()), Some(z.into())])
    }
}
