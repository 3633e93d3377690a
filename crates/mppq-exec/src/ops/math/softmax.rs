//! Softmax, LogSoftmax and Hardmax: opset < 13 coerces the input to 2-D at `axis` (default 1)
//! and works on the flattened trailing part; opset >= 13 works on the single `axis`
//! (default -1). One kernel parameterised by the function.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, float_tensor, reshape};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, normalize_axis};
use crate::value::Value;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::IntDType;

pub fn register(r: &mut OpRegistry) {
    for op in ["Softmax", "LogSoftmax", "Hardmax"] {
        r.register_fn(op, 1, build);
    }
}

#[derive(Clone, Copy)]
enum Func {
    Softmax,
    LogSoftmax,
    Hardmax,
}

struct SoftmaxKernel {
    func: Func,
    axis: i64,
    coerce_2d: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let func = match node.op.op_type.as_str() {
        "Softmax" => Func::Softmax,
        "LogSoftmax" => Func::LogSoftmax,
        _ => Func::Hardmax,
    };
    let coerce_2d = layer::opset(node) < 13;
    let axis = node.int("axis", if coerce_2d { 1 } else { -1 })?;
    Ok(Box::new(SoftmaxKernel { func, axis, coerce_2d }))
}

fn apply(func: Func, x: DispatchTensor, axis: usize) -> DispatchTensor {
    match func {
        Func::Softmax | Func::LogSoftmax => {
            let max = Dispatch::float_max_dim(x.clone(), axis);
            let shifted = Dispatch::float_sub(x, max);
            let exp = Dispatch::float_exp(shifted.clone());
            let sum = Dispatch::float_sum_dim(exp.clone(), axis);
            if matches!(func, Func::Softmax) {
                Dispatch::float_div(exp, sum)
            } else {
                Dispatch::float_sub(shifted, Dispatch::float_log(sum))
            }
        }
        Func::Hardmax => {
            let shape = x.shape().to_vec();
            let (device, dtype) = (x.device(), x.dtype());
            let arg = Dispatch::float_argmax(x, axis, IntDType::I64);
            let n = shape[axis];
            let mut iota_shape = vec![1; shape.len()];
            iota_shape[axis] = n;
            let iota = Dispatch::int_from_data(
                burn::tensor::TensorData::new((0..n as i64).collect::<Vec<_>>(), iota_shape),
                &device,
            );
            let arg = Dispatch::int_expand(arg, shape.clone().into());
            let iota = Dispatch::int_expand(iota, shape.into());
            let bd = crate::tensor::bool_for(&arg);
            let hit = Dispatch::int_equal(arg, iota, bd);
            Dispatch::bool_into_float(hit, dtype.into())
        }
    }
}

impl Kernel for SoftmaxKernel {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "input")?;
        let xs = x.shape();
        let rank = xs.len();
        let axis =
            if self.coerce_2d && self.axis == rank as i64 { Some(rank) } else { normalize_axis(self.axis, rank) };
        let Some(axis) = axis.filter(|_| rank > 0) else {
            return Err(ctx.err(format!("axis {} is out of range for rank {rank}", self.axis)));
        };
        if x.numel() == 0 {
            return Ok(vec![Some(x.into())]);
        }
        let y = if self.coerce_2d {
            let outer: usize = xs[..axis].iter().product();
            let inner: usize = xs[axis..].iter().product();
            let y = apply(self.func, reshape(x.into_dispatch(), &[outer, inner]), 1);
            reshape(y, &xs)
        } else {
            apply(self.func, x.into_dispatch(), axis)
        };
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
