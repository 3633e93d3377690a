//! Expand: broadcasts a tensor to a shape (numpy rules, in both directions).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{dims, empty, int_input, numel, one, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::broadcast_shapes;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Expand", 8, build);
}

struct Expand;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Expand))
}

impl Kernel for Expand {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let target = dims(ctx, &int_input(ctx, &ins.tensor(1)?, "shape")?, "shape")?;
        let s = x.shape();
        let Some(out) = broadcast_shapes(&s, &target) else {
            return Err(shape_err(ctx, &s, &target, "do not broadcast"));
        };
        numel(ctx, &out)?;
        let x = if s.len() < out.len() {
            let mut lifted = vec![1; out.len() - s.len()];
            lifted.extend_from_slice(&s);
            x.reshape(&lifted)
        } else {
            x
        };
        if out.contains(&0) {
            return one(empty(&out, x.dtype(), ctx.device)?);
        }
        one(x.expand(&out))
    }
}
