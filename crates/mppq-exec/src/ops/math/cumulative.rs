//! CumSum and CumProd: one cumulative kernel along an axis given as an input (exclusive,
//! reverse), parameterised by the operation and its identity element.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::axes::{axis, flip, full_like_dtype};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Slice;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("CumSum", 11, build);
    r.register_fn("CumProd", 26, build);
}

#[derive(Clone, Copy)]
enum Op {
    Sum,
    Prod,
}

impl Op {
    /// The value an exclusive scan starts from.
    fn identity(self) -> f64 {
        match self {
            Op::Sum => 0.0,
            Op::Prod => 1.0,
        }
    }

    fn apply(self, kind: Kind, x: DispatchTensor, axis: usize) -> DispatchTensor {
        match (self, kind) {
            (Op::Sum, Kind::Float) => Dispatch::float_cumsum(x, axis),
            (Op::Sum, _) => Dispatch::int_cumsum(x, axis),
            (Op::Prod, Kind::Float) => Dispatch::float_cumprod(x, axis),
            (Op::Prod, _) => Dispatch::int_cumprod(x, axis),
        }
    }
}

struct Cumulative {
    op: Op,
    exclusive: bool,
    reverse: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = if node.op.op_type == "CumProd" { Op::Prod } else { Op::Sum };
    Ok(Box::new(Cumulative { op, exclusive: node.int("exclusive", 0)? != 0, reverse: node.int("reverse", 0)? != 0 }))
}

impl Kernel for Cumulative {
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
        if x.kind() == Kind::Bool {
            return Err(ctx.err("boolean inputs are not supported"));
        }
        let a = axis(ctx, ax, x.rank())?;
        let shape = x.shape();
        let n = shape[a];
        if n == 0 {
            return Ok(vec![Some(x.into())]);
        }
        let mut x = if self.reverse { flip(x, &[a]) } else { x };
        if self.exclusive {
            // Shift by one along the axis: [identity, x0, .., x(n-2)].
            let mut first = shape.clone();
            first[a] = 1;
            let start = full_like_dtype(&first, self.op.identity(), &x, ctx);
            let mut slices: Vec<Slice> = shape.iter().map(|_| Slice::new(0, None, 1)).collect();
            slices[a] = Slice::new(0, Some(n as isize - 1), 1);
            x = Tensor::cat(vec![start, x.slice(&slices)], a);
        }
        let kind = x.kind();
        let y = Tensor::from_dispatch(self.op.apply(kind, x.into_dispatch(), a));
        let y = if self.reverse { flip(y, &[a]) } else { y };
        Ok(vec![Some(y.into())])
    }
}
