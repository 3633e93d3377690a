//! CumProd: cumulative product along an axis given as an input (exclusive, reverse).

use super::util::{axis, one};
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::{Scalar, Shape, Slice};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("CumProd", 26, build);
}

struct CumProd {
    exclusive: bool,
    reverse: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(CumProd { exclusive: node.int("exclusive", 0)? != 0, reverse: node.int("reverse", 0)? != 0 }))
}

fn flip(t: Tensor, a: usize) -> Tensor {
    let inner = match t.kind() {
        Kind::Float => Dispatch::float_flip(t.into_dispatch(), &[a]),
        _ => Dispatch::int_flip(t.into_dispatch(), &[a]),
    };
    Tensor::from_dispatch(inner)
}

impl Kernel for CumProd {
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
            return one(x);
        }
        let mut x = if self.reverse { flip(x, a) } else { x };
        if self.exclusive {
            // Shift by one along the axis: [1, x0, .., x(n-2)].
            let mut oshape = shape.clone();
            oshape[a] = 1;
            let dev = ctx.device.dispatch();
            let dt = x.burn_dtype();
            let ones = match x.kind() {
                Kind::Float => Dispatch::float_full(Shape::from(oshape), Scalar::from(1.0), dev, dt.into()),
                _ => Dispatch::int_full(Shape::from(oshape), Scalar::from(1i64), dev, dt.into()),
            };
            let mut slices: Vec<Slice> = shape.iter().map(|_| Slice::new(0, None, 1)).collect();
            slices[a] = Slice::new(0, Some(n as isize - 1), 1);
            x = Tensor::cat(vec![Tensor::from_dispatch(ones), x.slice(&slices)], a);
        }
        let y = match x.kind() {
            Kind::Float => Dispatch::float_cumprod(x.into_dispatch(), a),
            _ => Dispatch::int_cumprod(x.into_dispatch(), a),
        };
        let y = Tensor::from_dispatch(y);
        one(if self.reverse { flip(y, a) } else { y })
    }
}
