//! Concat: joins tensors of one type along an axis.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, one, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Concat", 1, build);
}

struct Concat {
    axis: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    // Opset 1 defaulted the axis to 1; it is required from opset 4 on.
    let axis = if node.opset < 4 { node.int("axis", 1)? } else { node.int("axis", i64::MIN)? };
    if axis == i64::MIN {
        return Err(node.err("attribute `axis` is required"));
    }
    Ok(Box::new(Concat { axis }))
}

impl Kernel for Concat {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let parts = ctx.inputs(inputs).rest(0)?;
        let Some(first) = parts.first() else {
            return Err(ctx.err("at least one input is required"));
        };
        let (shape0, dtype) = (first.shape(), first.dtype());
        let ax = axis(ctx, self.axis, shape0.len())?;
        let mut total = 0usize;
        for p in &parts {
            let s = p.shape();
            if p.dtype() != dtype {
                return Err(ctx.err(format!("inputs have different types: {} and {}", dtype, p.dtype())));
            }
            if s.len() != shape0.len() || s.iter().zip(&shape0).enumerate().any(|(i, (a, b))| i != ax && a != b) {
                return Err(shape_err(ctx, &shape0, &s, format!("cannot be concatenated along axis {ax}")));
            }
            total += s[ax];
        }
        let mut out = shape0.clone();
        out[ax] = total;
        if out.contains(&0) {
            return one(empty(&out, dtype, ctx.device)?);
        }
        let mut nonempty: Vec<Tensor> = parts.into_iter().filter(|p| p.shape()[ax] > 0).collect();
        if nonempty.len() == 1 {
            return one(nonempty.remove(0));
        }
        one(Tensor::cat(nonempty, ax))
    }
}
