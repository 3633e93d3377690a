//! ReverseSequence: reverses the first `sequence_lens[b]` steps of every batch entry along the
//! time axis, as one `gather` with an exact host-built index map.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{gather, int_input, one, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ReverseSequence", 10, build);
}

struct ReverseSequence {
    time: usize,
    batch: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let (time, batch) = (node.int("time_axis", 0)?, node.int("batch_axis", 1)?);
    match (time, batch) {
        (0, 1) => Ok(Box::new(ReverseSequence { time: 0, batch: 1 })),
        (1, 0) => Ok(Box::new(ReverseSequence { time: 1, batch: 0 })),
        _ => Err(node.err(format!("time_axis {time} and batch_axis {batch} must be 0 and 1"))),
    }
}

impl Kernel for ReverseSequence {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, l) = (ins.tensor(0)?, ins.tensor(1)?);
        let s = x.shape();
        if s.len() < 2 {
            return Err(ctx.err(format!("input must have rank >= 2, not {}", s.len())));
        }
        let lens = int_input(ctx, &l, "sequence_lens")?;
        let (t, b) = (s[self.time], s[self.batch]);
        if lens.len() != b {
            return Err(shape_err(ctx, &s, &l.shape(), "sequence_lens does not match the batch axis"));
        }
        if x.numel() == 0 {
            return one(x);
        }
        let mut idx = vec![0i64; t * b];
        for (bi, &len) in lens.iter().enumerate() {
            if !(0..=t as i64).contains(&len) {
                return Err(ctx.err(format!("sequence length {len} is out of range 0..={t}")));
            }
            for ti in 0..t as i64 {
                let src = if ti < len { len - 1 - ti } else { ti };
                let pos = if self.time == 0 { ti as usize * b + bi } else { bi * t + ti as usize };
                idx[pos] = src;
            }
        }
        let mut ishape = vec![1; s.len()];
        ishape[0] = s[0];
        ishape[1] = s[1];
        let idx = Tensor::from_i64(&ishape, idx, ctx.device).expand(&s);
        one(gather(x, self.time, &idx)?)
    }
}
