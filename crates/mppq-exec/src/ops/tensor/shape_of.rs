//! Shape (with the `start`/`end` of opset 15) and Size: a tensor's dimensions and element count
//! as exact int64 values.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::one;
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Shape", 1, build);
    r.register_fn("Size", 1, build);
}

enum ShapeOf {
    Shape { start: i64, end: Option<i64> },
    Size,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    if node.op.op_type == "Size" {
        return Ok(Box::new(ShapeOf::Size));
    }
    let (start, end) = if node.opset >= 15 {
        (node.int("start", 0)?, if node.has("end") { Some(node.int("end", 0)?) } else { None })
    } else {
        (0, None)
    };
    Ok(Box::new(ShapeOf::Shape { start, end }))
}

/// Clamps a possibly negative `start`/`end` attribute into `0..=rank`.
fn clamp(v: i64, rank: usize) -> usize {
    let r = rank as i64;
    let v = if v < 0 { v + r } else { v };
    v.clamp(0, r) as usize
}

impl Kernel for ShapeOf {
    /// Only the shape is read.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let shape = x.shape();
        match self {
            ShapeOf::Size => {
                let n = i64::try_from(x.numel()).map_err(|_| ctx.err("element count does not fit in int64"))?;
                one(Tensor::from_i64(&[], vec![n], ctx.device))
            }
            ShapeOf::Shape { start, end } => {
                let s = clamp(*start, shape.len());
                let e = end.map_or(shape.len(), |e| clamp(e, shape.len()));
                let dims: Vec<i64> = if s < e { shape[s..e].iter().map(|&d| d as i64).collect() } else { vec![] };
                one(Tensor::from_i64(&[dims.len()], dims, ctx.device))
            }
        }
    }
}
