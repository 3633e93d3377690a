//! OneHot: `values[1]` where the (truncated, negative-wrapped) index equals the position along
//! the new axis, `values[0]` elsewhere; out-of-range indices give an all-off row.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, filled, numel, one, scalar_f64, slice_axis_one};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("OneHot", 9, build);
}

struct OneHot {
    axis: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(OneHot { axis: node.int("axis", -1)? }))
}

impl Kernel for OneHot {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (i, depth, values) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        if depth.numel() != 1 || values.numel() != 2 {
            return Err(ctx.err("depth must be a scalar and values must have two elements"));
        }
        if i.kind() == Kind::Bool {
            return Err(ctx.err("indices must be numeric"));
        }
        let d = scalar_f64(ctx, &depth, "depth")?;
        if !(1.0..(1u64 << 31) as f64).contains(&d) {
            return Err(ctx.err(format!("depth {d} is invalid")));
        }
        let d = d as i64;
        let ishape = i.shape();
        let ax = axis(ctx, self.axis, ishape.len() + 1)?;
        let idx: Vec<i64> = i.to_f64_vec().into_iter().map(|v| v as i64).collect();
        let mut out = ishape.clone();
        out.insert(ax, d as usize);
        if numel(ctx, &out)? == 0 {
            return one(empty(&out, values.dtype(), ctx.device)?);
        }
        let outer: usize = ishape[..ax].iter().product();
        let inner: usize = ishape[ax..].iter().product();
        let du = d as usize;
        let mut mask = vec![false; outer * du * inner];
        for o in 0..outer {
            for n in 0..inner {
                let v = idx[o * inner + n];
                let v = if v < 0 { v + d } else { v };
                if (0..d).contains(&v) {
                    mask[(o * du + v as usize) * inner + n] = true;
                }
            }
        }
        let mask = Tensor::from_bool(&out, mask, ctx.device);
        let values = values.reshape(&[2]);
        let off = slice_axis_one(values.clone(), 0, 0);
        let on = slice_axis_one(values, 0, 1);
        let off = filled(&off, &out, ctx.device)?;
        let on = filled(&on, &out, ctx.device)?;
        one(off.mask_where(&mask, on))
    }
}
