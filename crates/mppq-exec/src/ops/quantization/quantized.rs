//! Integer and quantized matrix products and convolutions: MatMulInteger, ConvInteger,
//! QLinearMatMul, QLinearConv. Zero points are subtracted exactly (int64 for MatMulInteger,
//! float64 elsewhere: 8-bit products sum exactly), the accumulator is rescaled by
//! `a_scale * b_scale / y_scale` computed in the scales' own precision (as the reference does),
//! then rounded half to even, shifted by the output zero point and saturated.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::math::matmul::matmul;
use crate::ops::nn::conv::{conv_forward, parse_conv};
use crate::ops::util::layer::{Window, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor, broadcast_pair};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MatMulInteger", 10, build);
    r.register_fn("ConvInteger", 10, build);
    r.register_fn("QLinearMatMul", 10, build);
    r.register_fn("QLinearConv", 10, build);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    MatMulInteger,
    ConvInteger,
    QLinearMatMul,
    QLinearConv,
}

struct Quantized {
    op: Op,
    conv: Option<(Window, usize)>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = match node.op.op_type.as_str() {
        "MatMulInteger" => Op::MatMulInteger,
        "ConvInteger" => Op::ConvInteger,
        "QLinearMatMul" => Op::QLinearMatMul,
        _ => Op::QLinearConv,
    };
    let conv = if matches!(op, Op::ConvInteger | Op::QLinearConv) { Some(parse_conv(node)?) } else { None };
    Ok(Box::new(Quantized { op, conv }))
}

fn is_8bit(t: &Tensor) -> bool {
    matches!(t.dtype(), DataType::Int8 | DataType::Uint8)
}

/// `x - zp` in `to` (int64 or float64); `zp` is a scalar or broadcasts after `lift` reshaping.
fn centred(
    ctx: &KernelContext<'_>,
    x: Tensor,
    zp: Option<Tensor>,
    lift: &dyn Fn(&Tensor) -> Option<Vec<usize>>,
    to: DataType,
) -> Result<Tensor> {
    if !is_8bit(&x) {
        return Err(ctx.err(format!("{} operands are not supported (8-bit integers expected)", x.dtype())));
    }
    let x = x.cast(to)?;
    let Some(zp) = zp else { return Ok(x) };
    if zp.kind() != Kind::Int {
        return Err(ctx.err("zero points must be integers"));
    }
    let shape = if zp.numel() == 1 { Some(vec![1; x.rank()]) } else { lift(&zp) };
    let Some(shape) = shape.filter(|s| s.iter().product::<usize>() == zp.numel()) else {
        return Err(shape_err(ctx, zp.shape(), x.shape(), "zero point does not fit the operand"));
    };
    let zp = zp.cast(to)?.reshape(&shape);
    let (a, b, _) = broadcast_pair(x, zp).map_err(|(l, r)| shape_err(ctx, l, r, "zero point does not broadcast"))?;
    let d = match to {
        DataType::Int64 => Dispatch::int_sub(a.into_dispatch(), b.into_dispatch()),
        _ => Dispatch::float_sub(a.into_dispatch(), b.into_dispatch()),
    };
    Ok(Tensor::from_dispatch(d))
}

/// `a_scale * b_scale / y_scale` in the scales' precision, reshaped by `lift`, then as f64.
fn multiplier(
    ctx: &KernelContext<'_>,
    a: Tensor,
    b: Tensor,
    y: Tensor,
    rank: usize,
    lift_b: &dyn Fn(&Tensor) -> Option<Vec<usize>>,
) -> Result<Tensor> {
    for s in [&a, &b, &y] {
        if s.kind() != Kind::Float {
            return Err(ctx.err("scales must be floats"));
        }
    }
    let dt = a.dtype();
    let shape_of = |t: &Tensor, lift: &dyn Fn(&Tensor) -> Option<Vec<usize>>| -> Result<Vec<usize>> {
        if t.numel() == 1 {
            return Ok(vec![1; rank]);
        }
        lift(t)
            .filter(|s| s.iter().product::<usize>() == t.numel())
            .ok_or_else(|| shape_err(ctx, t.shape(), vec![], "scale does not fit the operand"))
    };
    let scalar_only = |_: &Tensor| None;
    let (sa, sb, sy) = (shape_of(&a, &scalar_only)?, shape_of(&b, lift_b)?, shape_of(&y, &scalar_only)?);
    let a = a.cast(dt)?.reshape(&sa);
    let b = b.cast(dt)?.reshape(&sb);
    let y = y.cast(dt)?.reshape(&sy);
    let (a, b, _) = broadcast_pair(a, b).map_err(|(l, r)| shape_err(ctx, l, r, "scales do not broadcast"))?;
    let ab = Tensor::from_dispatch(Dispatch::float_mul(a.into_dispatch(), b.into_dispatch()));
    let (ab, y, _) = broadcast_pair(ab, y).map_err(|(l, r)| shape_err(ctx, l, r, "scales do not broadcast"))?;
    Tensor::from_dispatch(Dispatch::float_div(ab.into_dispatch(), y.into_dispatch())).cast(DataType::Double)
}

/// `round(acc · mult) + zp`, saturated to the output type — in the runtime's precision:
/// ONNX Runtime converts the int32 accumulator to float32, multiplies by the float32 multiplier,
/// rounds half to even and only then adds the zero point (adding it first would break ties
/// differently for odd zero points).
fn requantize(
    ctx: &KernelContext<'_>,
    acc: Tensor,
    mult: Tensor,
    y_zp: Option<Tensor>,
    fallback: DataType,
) -> Result<Tensor> {
    let out_type = y_zp.as_ref().map_or(fallback, Tensor::dtype);
    let (lo, hi) = match out_type {
        DataType::Int8 => (-128.0, 127.0),
        DataType::Uint8 => (0.0, 255.0),
        other => return Err(ctx.err(format!("{other} outputs are not supported"))),
    };
    let rank = acc.rank();
    let acc = acc.cast(DataType::Float)?.cast(DataType::Double)?;
    let (acc, mult, _) = broadcast_pair(acc, mult).map_err(|(l, r)| shape_err(ctx, l, r, "scales do not broadcast"))?;
    // The f64 product of two float32 values is exact; rounding it to float32 gives the float32 product.
    let product = Tensor::from_dispatch(Dispatch::float_mul(acc.into_dispatch(), mult.into_dispatch()));
    let mut r = Dispatch::float_round(product.cast(DataType::Float)?.cast(DataType::Double)?.into_dispatch());
    if let Some(zp) = y_zp {
        if zp.numel() != 1 {
            return Err(shape_err(ctx, zp.shape(), vec![], "only a scalar output zero point is supported"));
        }
        let zp = zp.cast(DataType::Double)?.reshape(&vec![1; rank]).into_dispatch();
        r = Dispatch::float_add(r, zp);
    }
    Tensor::from_dispatch(Dispatch::float_clamp(r, lo.into(), hi.into())).cast(out_type)
}

impl Kernel for Quantized {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        // Per-row (A) and per-column (B) zero points / scales of matrix products.
        let rows = |t: &Tensor| (t.rank() == 1).then(|| vec![t.numel(), 1]);
        let cols = |t: &Tensor| (t.rank() == 1).then(|| vec![1, t.numel()]);
        let y = match self.op {
            Op::MatMulInteger => {
                let (a, b) = (ins.tensor(0)?, ins.tensor(1)?);
                let (azp, bzp) = (ins.opt_tensor(2)?, ins.opt_tensor(3)?);
                let a = centred(ctx, a, azp, &rows, DataType::Int64)?;
                let b = centred(ctx, b, bzp, &cols, DataType::Int64)?;
                matmul(ctx, a, b)?.cast(DataType::Int32)?
            }
            Op::ConvInteger => {
                let (x, w) = (ins.tensor(0)?, ins.tensor(1)?);
                let (xzp, wzp) = (ins.opt_tensor(2)?, ins.opt_tensor(3)?);
                let rank = x.rank();
                let per_m = move |t: &Tensor| {
                    (t.rank() == 1).then(|| {
                        std::iter::once(t.numel()).chain(std::iter::repeat_n(1, rank.saturating_sub(1))).collect()
                    })
                };
                let no = |_: &Tensor| None;
                let x = centred(ctx, x, xzp, &no, DataType::Double)?;
                let w = centred(ctx, w, wzp, &per_m, DataType::Double)?;
                let (window, group) = self.conv.as_ref().ok_or_else(|| ctx.err("no conv attributes"))?;
                conv_forward(ctx, window, *group, x, w, None)?.cast(DataType::Int32)?
            }
            Op::QLinearMatMul => {
                let (a, a_scale, azp) = (ins.tensor(0)?, ins.tensor(1)?, ins.opt_tensor(2)?);
                let (b, b_scale, bzp) = (ins.tensor(3)?, ins.tensor(4)?, ins.opt_tensor(5)?);
                let (y_scale, yzp) = (ins.tensor(6)?, ins.opt_tensor(7)?);
                let fallback = a.dtype();
                let a = centred(ctx, a, azp, &rows, DataType::Double)?;
                let b = centred(ctx, b, bzp, &cols, DataType::Double)?;
                let acc = matmul(ctx, a, b)?;
                let mult = multiplier(ctx, a_scale, b_scale, y_scale, acc.rank(), &cols)?;
                requantize(ctx, acc, mult, yzp, fallback)?
            }
            Op::QLinearConv => {
                let (x, x_scale, xzp) = (ins.tensor(0)?, ins.tensor(1)?, ins.opt_tensor(2)?);
                let (w, w_scale, wzp) = (ins.tensor(3)?, ins.tensor(4)?, ins.opt_tensor(5)?);
                let (y_scale, yzp, bias) = (ins.tensor(6)?, ins.opt_tensor(7)?, ins.opt_tensor(8)?);
                let rank = x.rank();
                let fallback = x.dtype();
                let per_m = move |t: &Tensor| {
                    (t.rank() == 1).then(|| {
                        std::iter::once(t.numel()).chain(std::iter::repeat_n(1, rank.saturating_sub(1))).collect()
                    })
                };
                let per_channel = move |t: &Tensor| {
                    (t.rank() == 1).then(|| {
                        [1, t.numel()].into_iter().chain(std::iter::repeat_n(1, rank.saturating_sub(2))).collect()
                    })
                };
                let no = |_: &Tensor| None;
                let x = centred(ctx, x, xzp, &no, DataType::Double)?;
                let w = centred(ctx, w, wzp, &per_m, DataType::Double)?;
                let bias = match bias {
                    None => None,
                    Some(b) if b.kind() == Kind::Int => Some(b.cast(DataType::Double)?),
                    Some(_) => return Err(ctx.err("the bias must be int32")),
                };
                let (window, group) = self.conv.as_ref().ok_or_else(|| ctx.err("no conv attributes"))?;
                let acc = conv_forward(ctx, window, *group, x, w, bias)?;
                let mult = multiplier(ctx, x_scale, w_scale, y_scale, acc.rank(), &per_channel)?;
                requantize(ctx, acc, mult, yzp, fallback)?
            }
        };
        Ok(vec![Some(y.into())])
    }
}
