//! QuantizeLinear and DequantizeLinear: per-tensor, per-axis and blocked (opset 21) scales and
//! zero points; 8/16/32-bit and 4/2-bit integer types (saturating, round half to even) and the
//! FP8 / FP4 types (`x / scale + zero_point` rounded as Cast does, with the `saturate`
//! attribute for FP8). Low-precision types are held by stand-in (see `crate::tensor`).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::axes::{self, fbin, full_like_dtype};
use crate::registry::OpRegistry;
use crate::tensor::{CastOptions, Kind, Tensor, is_low_precision};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::{Scalar, Slice};
use mppq_ir::DataType;
use mppq_ir::lowp::MiniFloat;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("QuantizeLinear", 10, build);
    r.register_fn("DequantizeLinear", 10, build);
}

struct QParams {
    axis: i64,
    block_size: usize,
}

struct Quantize {
    p: QParams,
    /// `output_dtype` (opset 21), used when there is no zero point.
    output_dtype: Option<DataType>,
    /// `saturate` (opset 19; FP8 outputs only).
    saturate: bool,
}

struct Dequantize {
    p: QParams,
    /// `output_dtype` (opset 23): the float type of the result; the scale's type when absent.
    output_dtype: Option<DataType>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let block = node.int("block_size", 0)?;
    if block < 0 {
        return Err(node.err(format!("block_size {block} must be >= 0")));
    }
    let p = QParams { axis: node.int("axis", 1)?, block_size: block as usize };
    let code = node.int("output_dtype", 0)?;
    if node.op.op_type == "DequantizeLinear" {
        let output_dtype = if code == 0 {
            None
        } else {
            match i32::try_from(code).ok().and_then(DataType::from_onnx_code) {
                Some(dt) if dt.is_float() && crate::tensor::burn_dtype(dt).is_some() => Some(dt),
                _ => return Err(node.err(format!("unsupported output_dtype {code}"))),
            }
        };
        return Ok(Box::new(Dequantize { p, output_dtype }));
    }
    let output_dtype = if code == 0 {
        None
    } else {
        let dt = i32::try_from(code)
            .ok()
            .and_then(DataType::from_onnx_code)
            .ok_or_else(|| node.err(format!("bad output_dtype {code}")))?;
        if range(dt).is_none() && MiniFloat::of(dt).is_none() {
            return Err(crate::error::ExecError::Unsupported {
                op_type: node.op.op_type.clone(),
                domain: "ai.onnx".into(),
                opset: node.opset,
                node: node.label().to_string(),
                hint: format!(" (output type {dt})"),
            });
        }
        Some(dt)
    };
    let saturate = node.opset < 19 || node.int("saturate", 1)? != 0;
    Ok(Box::new(Quantize { p, output_dtype, saturate }))
}

/// The saturation range of a quantized integer type.
fn range(dt: DataType) -> Option<(f64, f64)> {
    Some(match dt {
        DataType::Uint8 => (0.0, 255.0),
        DataType::Int8 => (-128.0, 127.0),
        DataType::Uint16 => (0.0, 65535.0),
        DataType::Int16 => (-32768.0, 32767.0),
        DataType::Int32 => (-2147483648.0, 2147483647.0),
        DataType::Uint4 => (0.0, 15.0),
        DataType::Int4 => (-8.0, 7.0),
        DataType::Uint2 => (0.0, 3.0),
        DataType::Int2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// Brings a scale or zero point to the shape of `x` (per-tensor, per-axis or blocked).
fn broadcast_param(ctx: &KernelContext<'_>, p: Tensor, x_shape: &[usize], q: &QParams, what: &str) -> Result<Tensor> {
    let rank = x_shape.len();
    let ps = p.shape();
    if p.numel() == 1 && q.block_size == 0 {
        return Ok(p.reshape(&vec![1; rank]).expand(x_shape));
    }
    if rank == 0 {
        return Err(ctx.err(format!("{what} must have one element for a scalar input, not shape {ps:?}")));
    }
    let axis = axes::axis(ctx, q.axis, rank)?;
    let d = x_shape[axis];
    if q.block_size == 0 {
        if ps.len() != 1 || ps[0] != d {
            return Err(ctx.err(format!("{what} of shape {ps:?} does not match axis {axis} of input {x_shape:?}")));
        }
        return Ok(p.reshape(&axes::axis_shape(rank, axis, d)).expand(x_shape));
    }
    let b = q.block_size;
    let nb = d.div_ceil(b);
    let ok =
        ps.len() == rank && ps.iter().enumerate().all(|(i, s)| if i == axis { *s == nb } else { *s == x_shape[i] });
    if !ok {
        return Err(ctx.err(format!(
            "blocked {what} of shape {ps:?} does not match input {x_shape:?} with block {b} on axis {axis}"
        )));
    }
    let mut split = ps.clone();
    split.insert(axis + 1, 1);
    let mut wide = split.clone();
    wide[axis + 1] = b;
    let mut merged = ps.clone();
    merged[axis] = nb * b;
    let full = p.reshape(&split).expand(&wide).reshape(&merged);
    let mut slices: Vec<Slice> = (0..rank).map(|_| Slice::new(0, None, 1)).collect();
    slices[axis] = Slice::new(0, Some(d as isize), 1);
    Ok(full.slice(&slices))
}

impl Kernel for Quantize {
    /// Low-precision zero points and scales (E8M0) are decoded; FP8/FP4/4-bit outputs rounded.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, scale, zp) = (ins.tensor(0)?, ins.tensor(1)?, ins.opt_tensor(2)?);
        if (x.kind() != Kind::Float && x.dtype() != DataType::Int32) || is_low_precision(x.dtype()) {
            return Err(ctx.err(format!("{} inputs are not supported", x.dtype())));
        }
        if scale.kind() != Kind::Float {
            return Err(ctx.err("scale must be a float tensor"));
        }
        let target = match (&zp, self.output_dtype) {
            (Some(z), _) => z.dtype(),
            (None, Some(dt)) => dt,
            (None, None) => DataType::Uint8,
        };
        let shape = x.shape();
        if MiniFloat::of(target).is_some() {
            // y = cast(x / scale + zero point): rounded to nearest even, FP8 saturating or not
            // by `saturate` (the zero point is 0 in practice, but the formula is the same).
            let x = x.cast(DataType::Float)?;
            let scale = broadcast_param(ctx, scale.cast(DataType::Float)?, &shape, &self.p, "scale")?;
            let q = fbin(&x, &scale, Dispatch::float_div);
            let q = match zp {
                Some(z) => {
                    let z = broadcast_param(ctx, z.cast(DataType::Float)?, &shape, &self.p, "zero point")?;
                    fbin(&q, &z, Dispatch::float_add)
                }
                None => q,
            };
            let y = q.cast_with(target, CastOptions { saturate: self.saturate, ..CastOptions::default() })?;
            return Ok(vec![Some(y.into())]);
        }
        let (lo, hi) = range(target).ok_or_else(|| ctx.err(format!("{target} outputs are not supported")))?;
        // int32 bounds are not exact in f32: compute in f64 for that target.
        let work = if target == DataType::Int32 { DataType::Double } else { DataType::Float };
        let x = x.cast(work)?;
        let scale = broadcast_param(ctx, scale.cast(work)?, &shape, &self.p, "scale")?;
        let q = Tensor::from_dispatch(Dispatch::float_round(fbin(&x, &scale, Dispatch::float_div).into_dispatch()));
        let q = match zp {
            Some(z) => {
                let z = broadcast_param(ctx, z.cast(work)?, &shape, &self.p, "zero point")?;
                fbin(&q, &z, Dispatch::float_add)
            }
            None => q,
        };
        let q = Tensor::from_dispatch(Dispatch::float_clamp(q.into_dispatch(), Scalar::from(lo), Scalar::from(hi)));
        let y = q.cast(target)?;
        Ok(vec![Some(y.into())])
    }
}

impl Kernel for Dequantize {
    /// FP8/FP4/4-bit/2-bit inputs and zero points and E8M0 scales are decoded.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, scale, zp) = (ins.tensor(0)?, ins.tensor(1)?, ins.opt_tensor(2)?);
        if x.kind() != Kind::Int && !(is_low_precision(x.dtype()) && x.dtype().is_float()) {
            return Err(ctx.err(format!("{} inputs are not supported", x.dtype())));
        }
        if scale.kind() != Kind::Float {
            return Err(ctx.err("scale must be a float tensor"));
        }
        if let Some(z) = &zp
            && z.dtype() != x.dtype()
        {
            return Err(ctx.err(format!("zero point type {} differs from input type {}", z.dtype(), x.dtype())));
        }
        let out_dtype = self.output_dtype.unwrap_or(scale.dtype());
        let shape = x.shape();
        let xf = x.cast(DataType::Float)?;
        let xf = match zp {
            Some(z) => {
                let z = broadcast_param(ctx, z.cast(DataType::Float)?, &shape, &self.p, "zero point")?;
                fbin(&xf, &z, Dispatch::float_sub)
            }
            None => xf,
        };
        let scale = broadcast_param(ctx, scale.cast(DataType::Float)?, &shape, &self.p, "scale")?;
        let y = fbin(&xf, &scale, Dispatch::float_mul).cast(out_dtype)?;
        Ok(vec![Some(y.into())])
    }
}

/// Quantizes `x` to uint8 with one scale and zero point (shared with DynamicQuantizeLinear).
pub(super) fn quantize_u8(ctx: &KernelContext<'_>, x: &Tensor, scale: f32, zp: f32) -> Result<Tensor> {
    let s = full_like_dtype(&x.shape(), f64::from(scale), x, ctx);
    let q = Dispatch::float_round(fbin(x, &s, Dispatch::float_div).into_dispatch());
    let q = Dispatch::float_add_scalar(q, Scalar::from(f64::from(zp)));
    let q = Dispatch::float_clamp(q, Scalar::from(0.0), Scalar::from(255.0));
    Tensor::from_dispatch(q).cast(DataType::Uint8)
}

#[cfg(test)]
mod tests {
    use crate::ops::util::axes::run_single;
    use crate::{Device, Tensor};
    use mppq_ir::{DataType, Operation};

    #[test]
    fn quantize_saturates_and_rounds_half_to_even() {
        let d = Device::cpu();
        let x = || Tensor::from_f32(&[6], vec![0.5, 1.5, 2.5, -2.5, 1e12, -1e12], &d);
        let scale = || Tensor::from_f32(&[], vec![1.0], &d);
        let cases: [(DataType, Vec<i64>); 3] = [
            (DataType::Uint8, vec![0, 2, 2, 0, 255, 0]),
            (DataType::Int8, vec![0, 2, 2, -2, 127, -128]),
            (DataType::Int32, vec![0, 2, 2, -2, 2147483647, -2147483648]),
        ];
        for (dt, want) in cases {
            let zp = Tensor::from_i64(&[], vec![0], &d).cast(dt).unwrap();
            let op = Operation::new("QuantizeLinear", "q").with_opset(21);
            let y = run_single(op, vec![("x", Some(x())), ("s", Some(scale())), ("z", Some(zp))], 1);
            assert_eq!(y[0].dtype(), dt);
            assert_eq!(y[0].to_i64_vec(), want, "{dt}");
        }
    }
}
