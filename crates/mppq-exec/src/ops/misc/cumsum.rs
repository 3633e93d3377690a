//! CumSum: cumulative sum along an axis given as an input (exclusive, reverse).

use super::util::{axis, flip, full_like_dtype};
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::Slice;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("CumSum", 11, build);
}

struct CumSum {
    exclusive: bool,
    reverse: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(CumSum { exclusive: node.int("exclusive", 0)? != 0, reverse: node.int("reverse", 0)? != 0 }))
}

impl Kernel for CumSum {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let ax = match ins.ints(1)?.as_deref() {
            Some([a]) => *a,
            _ => return Err(ctx.err("axis must be a tensor of one element")),
        };
        if x.rank() == 0 {
            return Err(ctx.err("input must have rank >= 1"));
        }
        let a = axis(ctx, ax, x.rank())?;
        let shape = x.shape();
        let n = shape[a];
        if x.kind() == Kind::Bool {
            return Err(ctx.err("boolean inputs are not supported"));
        }
        let mut x = if self.reverse { flip(x, &[a]) } else { x };
        if self.exclusive && n > 0 {
            // Shift by one along the axis: [0, x0, .., x(n-2)].
            let mut zshape = shape.clone();
            zshape[a] = 1;
            let zero = full_like_dtype(&zshape, 0.0, &x, ctx);
            let mut slices: Vec<Slice> = shape.iter().map(|_| Slice::new(0, None, 1)).collect();
            slices[a] = Slice::new(0, Some(n as isize - 1), 1);
            x = Tensor::cat(vec![zero, x.slice(&slices)], a);
        }
        let y = match x.kind() {
            Kind::Float => Dispatch::float_cumsum(x.into_dispatch(), a),
            _ => Dispatch::int_cumsum(x.into_dispatch(), a),
        };
        let y = Tensor::from_dispatch(y);
        let y = if self.reverse { flip(y, &[a]) } else { y };
        Ok(vec![Some(y.into())])
    }
}
