//! Split: cuts a tensor along an axis into parts given by `split` (attribute before opset 13,
//! input after) or into equal parts (the number of outputs, or `num_outputs` from opset 18; the
//! last part smaller when the axis does not divide).

use super::slice::slice_axis;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axis, dims, int_input};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Split", 1, build);
}

struct Split {
    axis: i64,
    split: Option<Vec<i64>>,
    outputs: usize,
    from_input: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let n = node.op.outputs().len();
    let num_outputs = node.int("num_outputs", 0)?;
    let outputs = if node.opset >= 18 && num_outputs > 0 { num_outputs as usize } else { n };
    if outputs == 0 {
        return Err(node.err("Split needs at least one output"));
    }
    let from_input = node.opset >= 13 || node.opset == 1;
    let split = if node.opset < 13 { node.ints("split")? } else { None };
    Ok(Box::new(Split { axis: node.int("axis", 0)?, split, outputs, from_input }))
}

impl Kernel for Split {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let ax = axis(ctx, self.axis, x.rank())?;
        let d = x.shape()[ax];
        let given = match (&self.split, self.from_input) {
            (Some(s), _) => Some(s.clone()),
            (None, true) => match ins.opt_tensor(1)? {
                Some(t) => Some(int_input(ctx, &t, "split")?),
                None => None,
            },
            (None, false) => None,
        };
        let sizes = match given {
            Some(s) => {
                let s = dims(ctx, &s, "split")?;
                if s.len() != self.outputs || s.iter().sum::<usize>() != d {
                    return Err(ctx.err(format!("split {s:?} does not cut an axis of {d} into {} parts", self.outputs)));
                }
                s
            }
            None => {
                let chunk = d.div_ceil(self.outputs);
                (0..self.outputs).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
            }
        };
        let mut out = Vec::with_capacity(sizes.len());
        let mut start = 0usize;
        for len in sizes {
            let part = if len == d { x.clone() } else { slice_axis(x.clone(), ax, start as i64, len, 1, ctx)? };
            out.push(Some(Value::Tensor(part)));
            start += len;
        }
        Ok(out)
    }
}
