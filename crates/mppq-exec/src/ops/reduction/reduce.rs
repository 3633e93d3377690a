//! ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
//! ReduceLogSumExp and ReduceSumSquare: one kernel parameterised by the reduction kind
//! (a pre-map, a core reduction over each axis, a post-map).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::axes::{full_like_dtype, normalize_axes};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::Shape;
use mppq_ir::DataType;

const OPS: [(&str, Red); 10] = [
    ("ReduceSum", Red::Sum),
    ("ReduceMean", Red::Mean),
    ("ReduceMax", Red::Max),
    ("ReduceMin", Red::Min),
    ("ReduceProd", Red::Prod),
    ("ReduceL1", Red::L1),
    ("ReduceL2", Red::L2),
    ("ReduceLogSum", Red::LogSum),
    ("ReduceLogSumExp", Red::LogSumExp),
    ("ReduceSumSquare", Red::SumSquare),
];

pub fn register(r: &mut OpRegistry) {
    for (name, _) in OPS {
        r.register_fn(name, 1, build);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

#[derive(Clone, Copy)]
enum Core {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

impl Red {
    fn core(self) -> Core {
        match self {
            Red::Mean => Core::Mean,
            Red::Max => Core::Max,
            Red::Min => Core::Min,
            Red::Prod => Core::Prod,
            _ => Core::Sum,
        }
    }

    /// The value of the reduction over an empty set.
    fn identity(self, kind: Kind) -> f64 {
        match self {
            Red::Sum | Red::L1 | Red::L2 | Red::SumSquare => 0.0,
            Red::Prod => 1.0,
            Red::Mean => f64::NAN,
            Red::LogSum | Red::LogSumExp => f64::NEG_INFINITY,
            Red::Max if kind == Kind::Int => i64::MIN as f64,
            Red::Min if kind == Kind::Int => i64::MAX as f64,
            Red::Max => f64::NEG_INFINITY,
            Red::Min => f64::INFINITY,
        }
    }
}

struct Reduce {
    red: Red,
    /// Axes from the attribute (older opsets); `None` when they come from input 1.
    attr_axes: Option<Vec<i64>>,
    axes_input: bool,
    keepdims: bool,
    noop_with_empty_axes: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let red = OPS
        .iter()
        .find(|(n, _)| *n == node.op.op_type)
        .map(|(_, r)| *r)
        .ok_or_else(|| node.err("unknown reduction"))?;
    // Axes became an input at opset 13 for ReduceSum, 18 for the others.
    let axes_input = node.opset >= if red == Red::Sum { 13 } else { 18 };
    Ok(Box::new(Reduce {
        red,
        attr_axes: if axes_input { None } else { node.ints("axes")? },
        axes_input,
        keepdims: node.int("keepdims", 1)? != 0,
        noop_with_empty_axes: node.int("noop_with_empty_axes", 0)? != 0,
    }))
}

type Un = fn(burn::backend::DispatchTensor) -> burn::backend::DispatchTensor;

fn map(t: Tensor, f: Un, g: Un) -> Tensor {
    match t.kind() {
        Kind::Float => Tensor::from_dispatch(f(t.into_dispatch())),
        _ => Tensor::from_dispatch(g(t.into_dispatch())),
    }
}

fn square_f(t: burn::backend::DispatchTensor) -> burn::backend::DispatchTensor {
    Dispatch::float_mul(t.clone(), t)
}

fn square_i(t: burn::backend::DispatchTensor) -> burn::backend::DispatchTensor {
    Dispatch::int_mul(t.clone(), t)
}

fn reduce_core(t: Tensor, axes: &[usize], core: Core) -> Tensor {
    let float = t.kind() == Kind::Float;
    let mut x = t.into_dispatch();
    for &a in axes {
        x = match (float, core) {
            (true, Core::Sum) => Dispatch::float_sum_dim(x, a),
            (true, Core::Mean) => Dispatch::float_mean_dim(x, a),
            (true, Core::Max) => Dispatch::float_max_dim(x, a),
            (true, Core::Min) => Dispatch::float_min_dim(x, a),
            (true, Core::Prod) => Dispatch::float_prod_dim(x, a),
            (false, Core::Sum) => Dispatch::int_sum_dim(x, a),
            (false, Core::Mean) => Dispatch::int_mean_dim(x, a),
            (false, Core::Max) => Dispatch::int_max_dim(x, a),
            (false, Core::Min) => Dispatch::int_min_dim(x, a),
            (false, Core::Prod) => Dispatch::int_prod_dim(x, a),
        };
    }
    Tensor::from_dispatch(x)
}

/// `log(sum(exp(x)))` over `axes` (dims kept), shifted by the maximum so large inputs do not
/// overflow; an infinite maximum is not subtracted (the result is then that infinity).
fn log_sum_exp(x: Tensor, axes: &[usize], in_shape: &[usize]) -> Tensor {
    let m = reduce_core(x.clone(), axes, Core::Max).into_dispatch();
    let inf = Dispatch::float_is_inf(m.clone(), crate::tensor::bool_for(&m));
    let zeros = Dispatch::float_zeros(m.shape(), &m.device(), m.dtype().into());
    let m = Dispatch::float_mask_where(m, inf, zeros);
    let shifted =
        Dispatch::float_sub(x.into_dispatch(), Dispatch::float_expand(m.clone(), Shape::from(in_shape.to_vec())));
    let s = reduce_core(Tensor::from_dispatch(Dispatch::float_exp(shifted)), axes, Core::Sum).into_dispatch();
    Tensor::from_dispatch(Dispatch::float_add(Dispatch::float_log(s), m))
}

impl Kernel for Reduce {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let axes =
            if self.axes_input { ins.ints(1)?.unwrap_or_default() } else { self.attr_axes.clone().unwrap_or_default() };
        let rank = x.rank();
        let kind = x.kind();
        if kind == Kind::Bool && !matches!(self.red, Red::Max | Red::Min) {
            return Err(ctx.err("boolean inputs are only allowed for ReduceMax and ReduceMin"));
        }
        if axes.is_empty() && self.noop_with_empty_axes {
            // No reduction; the element-wise part still applies (as in the reference).
            let y = match self.red {
                Red::L1 => map(x, Dispatch::float_abs, Dispatch::int_abs),
                Red::SumSquare => map(x, square_f, square_i),
                _ => x,
            };
            return Ok(vec![Some(y.into())]);
        }
        let axes: Vec<usize> = if axes.is_empty() { (0..rank).collect() } else { normalize_axes(ctx, &axes, rank)? };
        let in_shape = x.shape();
        let mut keep_shape = in_shape.clone();
        for &a in &axes {
            keep_shape[a] = 1;
        }
        let out_shape: Vec<usize> = if self.keepdims {
            keep_shape.clone()
        } else {
            in_shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| *d).collect()
        };
        if x.numel() == 0 {
            let out_numel: usize = out_shape.iter().product();
            let v = if out_numel == 0 { 0.0 } else { self.red.identity(kind) };
            return Ok(vec![Some(full_like_dtype(&out_shape, v, &x, ctx).into())]);
        }
        let (x, was_bool) = if kind == Kind::Bool { (x.cast(DataType::Int64)?, true) } else { (x, false) };
        if self.red == Red::LogSumExp && kind == Kind::Float {
            let y = log_sum_exp(x, &axes, &in_shape);
            let y = if self.keepdims { y } else { y.reshape(&out_shape) };
            return Ok(vec![Some(y.into())]);
        }
        let x = match self.red {
            Red::L1 => map(x, Dispatch::float_abs, Dispatch::int_abs),
            Red::L2 | Red::SumSquare => map(x, square_f, square_i),
            _ => x,
        };
        let y = reduce_core(x, &axes, self.red.core());
        let y = match (self.red, y.kind()) {
            (Red::L2, Kind::Float) => map(y, Dispatch::float_sqrt, |t| t),
            (Red::LogSum, Kind::Float) => map(y, Dispatch::float_log, |t| t),
            (Red::L2 | Red::LogSum | Red::LogSumExp, _) => {
                return Err(ctx.err(format!("{} inputs are not supported", y.dtype())));
            }
            _ => y,
        };
        let y = if was_bool { y.cast(DataType::Bool)? } else { y };
        let y = if self.keepdims { y } else { y.reshape(&out_shape) };
        Ok(vec![Some(y.into())])
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::util::axes::run_single;
    use crate::{Device, Tensor};
    use mppq_ir::Operation;

    #[test]
    fn log_sum_exp_does_not_overflow() {
        let d = Device::cpu();
        let x = Tensor::from_f32(&[2, 2], vec![1000.0, 1000.0, f32::NEG_INFINITY, f32::NEG_INFINITY], &d);
        let axes = Tensor::from_i64(&[1], vec![1], &d);
        let op = Operation::new("ReduceLogSumExp", "r").with_opset(18);
        let y = run_single(op, vec![("x", Some(x)), ("axes", Some(axes))], 1);
        let v = y[0].to_f32_vec();
        assert!((v[0] - (1000.0 + 2f32.ln())).abs() < 1e-3, "{v:?}");
        assert_eq!(v[1], f32::NEG_INFINITY);
        assert_eq!(y[0].shape(), vec![2, 1]);
    }

    #[test]
    fn integer_reductions_keep_their_type() {
        let d = Device::cpu();
        let x = || Tensor::from_i64(&[2, 3], vec![1, -2, 3, 4, 5, -6], &d).cast(mppq_ir::DataType::Int32).unwrap();
        for (op, want) in [
            ("ReduceSum", vec![2i64, 3]),
            ("ReduceMax", vec![3, 5]),
            ("ReduceProd", vec![-6, -120]),
            ("ReduceL1", vec![6, 15]),
        ] {
            let node = Operation::new(op, "r").with_opset(18).with_attr("keepdims", mppq_ir::Attribute::Int(0));
            let y = run_single(node, vec![("x", Some(x())), ("axes", Some(Tensor::from_i64(&[1], vec![-1], &d)))], 1);
            assert_eq!(y[0].dtype(), mppq_ir::DataType::Int32, "{op}");
            assert_eq!(y[0].to_i64_vec(), want, "{op}");
        }
    }
}
