//! Slice: starts/ends/axes (attributes before opset 10, inputs after, with steps), negative
//! steps, and clamping of out-of-range starts and ends exactly as the ONNX spec says.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, empty, flip, int_input, one};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::tensor::Slice as Range;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Slice", 1, build);
}

/// Starts, ends and optional axes given as attributes (before opset 10).
type RangeAttrs = (Vec<i64>, Vec<i64>, Option<Vec<i64>>);

struct SliceOp {
    attrs: Option<RangeAttrs>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let attrs = if node.opset < 10 {
        let starts = node.ints("starts")?.ok_or_else(|| node.err("attribute `starts` is required"))?;
        let ends = node.ints("ends")?.ok_or_else(|| node.err("attribute `ends` is required"))?;
        Some((starts, ends, node.ints("axes")?))
    } else {
        None
    };
    Ok(Box::new(SliceOp { attrs }))
}

/// The elements one axis keeps: `count` elements from `start` by `step` (exact ONNX clamping).
pub fn resolve(start: i64, end: i64, step: i64, dim: usize) -> (i64, usize) {
    let d = dim as i64;
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s = s.saturating_add(d);
    }
    if e < 0 {
        e = e.saturating_add(d);
    }
    let count = if step > 0 {
        s = s.clamp(0, d);
        e = e.clamp(0, d);
        if e > s { (e - s + step - 1) / step } else { 0 }
    } else {
        s = s.clamp(0, (d - 1).max(0));
        e = e.clamp(-1, d - 1);
        if s > e && d > 0 { (s - e + (-step) - 1) / (-step) } else { 0 }
    };
    (s, count as usize)
}

/// Keeps `count` elements of `axis` from `start` by `step` (which may be negative).
pub fn slice_axis(
    t: Tensor,
    ax: usize,
    start: i64,
    count: usize,
    step: i64,
    ctx: &KernelContext<'_>,
) -> Result<Tensor> {
    let rank = t.rank();
    let full = Range::new(0, None, 1);
    let mut ranges = vec![full; rank];
    if count == 0 {
        let mut s = t.shape();
        s[ax] = 0;
        return empty(&s, t.dtype(), ctx.device);
    }
    let last = start + (count as i64 - 1) * step;
    if step > 0 {
        ranges[ax] = Range::new(start as isize, Some(last as isize + 1), step as isize);
        Ok(t.slice(&ranges))
    } else {
        ranges[ax] = Range::new(last as isize, Some(start as isize + 1), (-step) as isize);
        Ok(flip(t.slice(&ranges), &[ax]))
    }
}

impl Kernel for SliceOp {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let rank = x.rank();
        let (starts, ends, axes_list, steps) = match &self.attrs {
            Some((s, e, a)) => (s.clone(), e.clone(), a.clone(), None),
            None => {
                let s = int_input(ctx, &ins.tensor(1)?, "starts")?;
                let e = int_input(ctx, &ins.tensor(2)?, "ends")?;
                let a = match ins.opt_tensor(3)? {
                    Some(t) => Some(int_input(ctx, &t, "axes")?),
                    None => None,
                };
                let st = match ins.opt_tensor(4)? {
                    Some(t) => Some(int_input(ctx, &t, "steps")?),
                    None => None,
                };
                (s, e, a, st)
            }
        };
        let n = starts.len();
        let axes_list = axes_list.unwrap_or_else(|| (0..n as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; n]);
        if ends.len() != n || axes_list.len() != n || steps.len() != n {
            return Err(ctx.err("starts, ends, axes and steps must have the same length"));
        }
        let shape = x.shape();
        let mut seen = vec![false; rank];
        let mut plan = Vec::with_capacity(n);
        for i in 0..n {
            let a = axis(ctx, axes_list[i], rank)?;
            if std::mem::replace(&mut seen[a], true) {
                return Err(ctx.err(format!("axis {a} is repeated")));
            }
            if steps[i] == 0 {
                return Err(ctx.err("steps must not be 0"));
            }
            let (s, count) = resolve(starts[i], ends[i], steps[i], shape[a]);
            plan.push((a, s, count, steps[i]));
        }
        let mut y = x;
        for (a, s, count, step) in plan {
            if step == 1 && s == 0 && count == shape[a] {
                continue;
            }
            y = slice_axis(y, a, s, count, step, ctx)?;
        }
        one(y)
    }
}
