//! CenterCropPad: per listed axis, crops the centre (start `(dim - size) / 2`) or zero-pads
//! around the input (before `(size - dim) / 2`, the rest after).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host::{axis, check_size, one, zeros};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::tensor::Slice;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("CenterCropPad", 18, build);
}

struct CenterCropPad {
    axes: Option<Vec<i64>>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(CenterCropPad { axes: node.ints("axes")? }))
}

impl Kernel for CenterCropPad {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let mut x = ins.tensor(0)?;
        let sizes = ins.ints(1)?.ok_or_else(|| ctx.err("shape is required"))?;
        let r = x.rank();
        let axes: Vec<usize> = match &self.axes {
            Some(a) => a.iter().map(|&a| axis(ctx, a, r)).collect::<Result<_>>()?,
            None => (0..r).collect(),
        };
        if axes.len() != sizes.len() {
            return Err(ctx.err(format!("shape has {} entries for {} axes", sizes.len(), axes.len())));
        }
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].contains(a) {
                return Err(ctx.err(format!("axis {a} is repeated")));
            }
        }
        let mut out_shape = x.shape();
        for (&a, &size) in axes.iter().zip(&sizes) {
            out_shape[a] = usize::try_from(size).map_err(|_| ctx.err(format!("invalid size {size}")))?;
        }
        check_size(ctx, &out_shape)?;
        for (&a, &size) in axes.iter().zip(&sizes) {
            if size < 0 {
                return Err(ctx.err(format!("negative size {size}")));
            }
            let size = size as usize;
            let shape = x.shape();
            let dim = shape[a];
            if size < dim {
                let start = (dim - size) / 2;
                let mut s: Vec<Slice> = shape.iter().map(|_| Slice::new(0, None, 1)).collect();
                s[a] = Slice::new(start as isize, Some((start + size) as isize), 1);
                x = x.slice(&s);
            } else if size > dim {
                let before = (size - dim) / 2;
                let after = size - dim - before;
                let zeros = |n: usize| {
                    let mut zs = shape.clone();
                    zs[a] = n;
                    zeros(&zs, &x, ctx)
                };
                let mut parts = Vec::new();
                if before > 0 {
                    parts.push(zeros(before));
                }
                parts.push(x.clone());
                if after > 0 {
                    parts.push(zeros(after));
                }
                x = Tensor::cat(parts, a);
            }
        }
        one(x)
    }
}
