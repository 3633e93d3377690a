//! PRelu: `x < 0 ? slope * x : x`, the slope broadcasting to the input (float and integer).
//! Before opset 7 a 1-D slope of one value per channel applies along axis 1.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{self, align_binary, int_scalar, one_shaped, select};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::Scalar;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("PRelu", 1, build);
}

struct PRelu {
    /// Opset < 7: a 1-D slope is per channel (axis 1).
    legacy: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(PRelu { legacy: node.opset < 7 }))
}

impl Kernel for PRelu {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, slope) = (ins.tensor(0)?, ins.tensor(1)?);
        let in_shape = x.shape();
        let ss = slope.shape();
        let slope = if self.legacy && ss.len() == 1 && in_shape.len() > 2 && in_shape.get(1) == ss.first() && ss[0] != 1
        {
            let mut shape = vec![1; in_shape.len() - 1];
            shape[0] = ss[0];
            slope.reshape(&shape)
        } else {
            slope
        };
        let (x, slope, shape) = align_binary(ctx, x, slope)?;
        if shape != in_shape {
            return Err(elementwise::shape_err(ctx, in_shape, slope.shape(), "slope does not broadcast to the input"));
        }
        let kind = x.kind();
        let dtype = x.burn_dtype();
        let (x, slope) = (x.into_dispatch(), slope.into_dispatch());
        let out = match kind {
            Kind::Float => {
                let mask = Dispatch::float_lower_elem(x.clone(), Scalar::Float(0.0), crate::tensor::bool_for(&x));
                select(mask, Dispatch::float_mul(x.clone(), slope), x, kind)
            }
            Kind::Int => {
                let mask = Dispatch::int_lower_elem(x.clone(), int_scalar(0, dtype), crate::tensor::bool_for(&x));
                select(mask, Dispatch::int_mul(x.clone(), slope), x, kind)
            }
            Kind::Bool => return Err(ctx.err("boolean inputs are not supported")),
        };
        one_shaped(out, &shape)
    }
}
