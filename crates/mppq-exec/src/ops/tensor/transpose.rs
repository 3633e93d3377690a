//! Transpose: permutes the axes (`perm`, default: reversed).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::one;
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Transpose", 1, build);
}

struct Transpose {
    perm: Option<Vec<i64>>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Transpose { perm: node.ints("perm")? }))
}

impl Kernel for Transpose {
    /// Data movement: the values are not read.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let rank = x.rank();
        let perm: Vec<usize> = match &self.perm {
            None => (0..rank).rev().collect(),
            Some(p) => {
                let mut seen = vec![false; rank];
                let mut out = Vec::with_capacity(rank);
                for &a in p {
                    let a = if a < 0 { a + rank as i64 } else { a };
                    match usize::try_from(a).ok().filter(|&a| a < rank && !seen[a]) {
                        Some(a) => {
                            seen[a] = true;
                            out.push(a);
                        }
                        None => {
                            return Err(ctx.err(format!("perm {p:?} is not a permutation of rank {rank}")));
                        }
                    }
                }
                if out.len() != rank {
                    return Err(ctx.err(format!("perm {p:?} is not a permutation of rank {rank}")));
                }
                out
            }
        };
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return one(x);
        }
        one(x.permute(&perm))
    }
}
