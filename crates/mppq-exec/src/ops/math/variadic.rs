//! Variadic element-wise operators with numpy broadcasting: Max, Min, Sum (float and integer)
//! and Mean (float). One fold, parameterised by the pairwise operation; float Max/Min propagate NaN.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::elementwise::{align_binary, one_shaped, select};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;

pub fn register(r: &mut OpRegistry) {
    for op in ["Max", "Min", "Sum", "Mean"] {
        r.register_fn(op, 1, build);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Max,
    Min,
    Sum,
    Mean,
}

struct Variadic(Op);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Variadic(match node.op.op_type.as_str() {
        "Max" => Op::Max,
        "Min" => Op::Min,
        "Sum" => Op::Sum,
        _ => Op::Mean,
    })))
}

/// Float Max/Min take `y` where it wins or is NaN, so NaN propagates from either side.
fn takes_y(wins: DispatchTensor, y: &DispatchTensor) -> DispatchTensor {
    Dispatch::bool_or(wins, Dispatch::float_is_nan(y.clone(), crate::tensor::bool_for(y)))
}

fn pair(op: Op, kind: Kind, x: DispatchTensor, y: DispatchTensor) -> DispatchTensor {
    match (op, kind) {
        (Op::Sum | Op::Mean, Kind::Float) => Dispatch::float_add(x, y),
        (Op::Sum | Op::Mean, _) => Dispatch::int_add(x, y),
        (Op::Max, Kind::Float) => {
            select(takes_y(Dispatch::float_lower(x.clone(), y.clone(), crate::tensor::bool_for(&y)), &y), y, x, kind)
        }
        (Op::Max, _) => select(Dispatch::int_lower(x.clone(), y.clone(), crate::tensor::bool_for(&x)), y, x, kind),
        (Op::Min, Kind::Float) => {
            select(takes_y(Dispatch::float_greater(x.clone(), y.clone(), crate::tensor::bool_for(&x)), &y), y, x, kind)
        }
        (Op::Min, _) => select(Dispatch::int_greater(x.clone(), y.clone(), crate::tensor::bool_for(&x)), y, x, kind),
    }
}

/// [`pair`] on two float32 values: Max/Min take `y` where it wins or is NaN.
#[inline(always)]
fn pair_f32(op: Op, x: f32, y: f32) -> f32 {
    match op {
        Op::Sum | Op::Mean => x + y,
        Op::Max => {
            if x < y || y.is_nan() {
                y
            } else {
                x
            }
        }
        Op::Min => {
            if x > y || y.is_nan() {
                y
            } else {
                x
            }
        }
    }
}

impl Kernel for Variadic {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ts = ctx.inputs(inputs).rest(0)?.into_iter();
        let Some(mut acc) = ts.next() else { return Err(ctx.err("needs at least one input")) };
        let kind = acc.kind();
        if kind == Kind::Bool || (self.0 == Op::Mean && kind != Kind::Float) {
            return Err(ctx.err(format!("{} inputs are not supported", acc.dtype())));
        }
        let mut n = 1usize;
        for t in ts {
            // CPU float32 of one shape (or with a scalar): one vectorized pass, same semantics.
            if kind == Kind::Float
                && let Some(y) = crate::cpu::elementwise::try_binary(&acc, &t, |x, y| pair_f32(self.0, x, y))
            {
                acc = y;
                n += 1;
                continue;
            }
            let (a, b, shape) = align_binary(ctx, acc, t)?;
            acc = crate::tensor::Tensor::from_dispatch_shaped(
                pair(self.0, kind, a.into_dispatch(), b.into_dispatch()),
                &shape,
            );
            n += 1;
        }
        let shape = acc.shape();
        let mut out = acc.into_dispatch();
        if self.0 == Op::Mean && n > 1 {
            out = Dispatch::float_div_scalar(out, Scalar::Float(n as f64));
        }
        one_shaped(out, &shape)
    }
}
