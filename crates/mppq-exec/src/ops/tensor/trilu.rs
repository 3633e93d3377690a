//! Trilu: keeps the upper (`upper = 1`, `j - i >= k`) or lower (`j - i <= k`) triangle of the
//! last two axes and zeroes the rest, with one broadcast mask.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{int_input, one};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Trilu", 14, build);
}

struct Trilu {
    upper: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Trilu { upper: node.int("upper", 1)? != 0 }))
}

impl Kernel for Trilu {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let k = match ins.opt_tensor(1)? {
            Some(t) => {
                let v = int_input(ctx, &t, "k")?;
                *v.first().ok_or_else(|| ctx.err("k must have one element"))?
            }
            None => 0,
        };
        let s = x.shape();
        if s.len() < 2 {
            return Err(ctx.err(format!("input must have rank >= 2, not {}", s.len())));
        }
        if x.numel() == 0 {
            return one(x);
        }
        let (n, m) = (s[s.len() - 2], s[s.len() - 1]);
        let keep: Vec<bool> = (0..n * m)
            .map(|p| {
                let (i, j) = ((p / m) as i64, (p % m) as i64);
                if self.upper { j - i >= k } else { j - i <= k }
            })
            .collect();
        let mut mshape = vec![1; s.len() - 2];
        mshape.extend_from_slice(&[n, m]);
        let mask = Tensor::from_bool(&mshape, keep, ctx.device).expand(&s);
        one(x.zeros_like().mask_where(&mask, x))
    }
}
