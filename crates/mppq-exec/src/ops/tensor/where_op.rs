//! Where: `condition ? x : y`, all three broadcasting (numpy rules); x and y of any one type.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{align_all, one_shaped, select};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Where", 9, build);
}

struct Where;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Where))
}

impl Kernel for Where {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (c, x, y) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        if c.kind() != Kind::Bool {
            return Err(ctx.err(format!("condition must be bool, got {}", c.dtype())));
        }
        if x.dtype() != y.dtype() {
            return Err(ctx.err(format!("x and y have different types: {} and {}", x.dtype(), y.dtype())));
        }
        let kind = x.kind();
        let (aligned, shape) = align_all(ctx, vec![c, x, y])?;
        let mut v = aligned.into_iter();
        let (Some(c), Some(x), Some(y)) = (v.next(), v.next(), v.next()) else {
            return Err(ctx.err("three inputs are required"));
        };
        one_shaped(select(c.into_dispatch(), x.into_dispatch(), y.into_dispatch(), kind), &shape)
    }
}
