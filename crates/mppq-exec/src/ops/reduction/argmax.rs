//! ArgMax and ArgMin (keepdims, select_last_index); int64 output.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::axes::{axis, flip};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::IntDType;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ArgMax", 1, build);
    r.register_fn("ArgMin", 1, build);
}

struct ArgExt {
    max: bool,
    axis: i64,
    keepdims: bool,
    last: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(ArgExt {
        max: node.op.op_type == "ArgMax",
        axis: node.int("axis", 0)?,
        keepdims: node.int("keepdims", 1)? != 0,
        last: node.int("select_last_index", 0)? != 0,
    }))
}

impl Kernel for ArgExt {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let shape = x.shape();
        let a = axis(ctx, self.axis, x.rank())?;
        if shape.is_empty() {
            return Err(ctx.err("input must have rank >= 1"));
        }
        let n = shape[a];
        if n == 0 {
            return Err(ctx.err(format!("cannot take the arg-extremum of an empty axis {a}")));
        }
        let x = match x.kind() {
            Kind::Bool => x.cast(DataType::Int64)?,
            _ => x,
        };
        let x = if self.last { flip(x, &[a]) } else { x };
        let idx = match (x.kind(), self.max) {
            (Kind::Float, true) => Dispatch::float_argmax(x.into_dispatch(), a, IntDType::I64),
            (Kind::Float, false) => Dispatch::float_argmin(x.into_dispatch(), a, IntDType::I64),
            (_, true) => Dispatch::int_argmax(x.into_dispatch(), a),
            (_, false) => Dispatch::int_argmin(x.into_dispatch(), a),
        };
        let mut idx = Tensor::from_dispatch(idx).cast(DataType::Int64)?;
        if self.last {
            // index in the flipped tensor i -> n - 1 - i
            let i = Dispatch::int_neg(idx.into_dispatch());
            idx = Tensor::from_dispatch(Dispatch::int_add_scalar(i, burn::tensor::Scalar::from(n as i64 - 1)));
        }
        let mut out_shape = shape.clone();
        if self.keepdims {
            out_shape[a] = 1;
        } else {
            out_shape.remove(a);
        }
        Ok(vec![Some(idx.reshape(&out_shape).into())])
    }
}
