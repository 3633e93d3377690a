//! MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv: one kernel. Zero points are
//! subtracted, the product (MatMul) or convolution (Conv, with all its attributes) is computed
//! by the registered float kernel in float64, which is exact integer accumulation for 8-bit
//! operands (|sum| < 2^53 for any K below 2^37), then either returned as int32 (the *Integer
//! ops) or requantized: `saturate(round_half_even(acc * (s_a * s_b / s_y)) + zp_y)`.
//! Per-axis parameters: per-row of A / per-column of B (MatMul), per-output-channel of W (Conv).

use super::util::one;
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor, broadcast_pair};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Scalar;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MatMulInteger", 10, build);
    r.register_fn("ConvInteger", 10, build);
    r.register_fn("QLinearMatMul", 10, build);
    r.register_fn("QLinearConv", 10, build);
}

struct QuantLinear {
    conv: bool,
    requant: bool,
    inner: Box<dyn Kernel>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let t = node.op.op_type.as_str();
    let conv = t.contains("Conv");
    let mut op = node.op.clone();
    op.op_type = if conv { "Conv" } else { "MatMul" }.to_string();
    op.domain = String::new();
    let opset = node.opset.max(13);
    op.opset = opset;
    let inner = node.registry.build(&OpNode { op: &op, opset, device: node.device, registry: node.registry })?;
    Ok(Box::new(QuantLinear { conv, requant: t.starts_with("QLinear"), inner }))
}

fn check_q(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<()> {
    if t.kind() != Kind::Int {
        return Err(ctx.err(format!("{what} must be an integer tensor, got {}", t.dtype())));
    }
    Ok(())
}

/// Reshapes a per-axis parameter (1-D of length > 1) to broadcast along `axis` of a rank-`rank`
/// tensor whose `axis` has `len` entries; scalars and one-element tensors stay as they are.
fn per_axis(ctx: &KernelContext<'_>, p: Tensor, rank: usize, axis: usize, len: usize, what: &str) -> Result<Tensor> {
    if p.numel() == 1 {
        return Ok(p.reshape(&[]));
    }
    if p.rank() == 1 && p.numel() == len && axis < rank {
        let mut s = vec![1; rank];
        s[axis] = len;
        return Ok(p.reshape(&s));
    }
    if p.rank() == rank {
        return Ok(p);
    }
    Err(ctx.err(format!("{what} of shape {:?} is neither per-tensor nor per-axis ({len} entries)", p.shape())))
}

/// `t - zp` in float64 (zp broadcast; shapes checked).
fn shifted(ctx: &KernelContext<'_>, t: Tensor, zp: Option<Tensor>, what: &str) -> Result<Tensor> {
    let shape = t.shape();
    let t = t.cast(DataType::Double)?;
    let Some(zp) = zp else { return Ok(t) };
    if zp.kind() != Kind::Int {
        return Err(ctx.err(format!("{what} zero point must be an integer tensor")));
    }
    let zp = zp.cast(DataType::Double)?;
    match broadcast_pair(t, zp) {
        Ok((a, b, out)) if out == shape => Ok(Tensor::from_dispatch(Dispatch::float_sub(a.into_dispatch(), b.into_dispatch()))),
        _ => Err(ctx.err(format!("{what} zero point does not broadcast to {shape:?}"))),
    }
}

fn mul(ctx: &KernelContext<'_>, a: Tensor, b: Tensor, div: bool) -> Result<Tensor> {
    let (sa, sb) = (a.shape(), b.shape());
    let (a, b, _) = broadcast_pair(a, b).map_err(|_| ctx.err(format!("scales of shapes {sa:?} and {sb:?} do not broadcast")))?;
    let (a, b) = (a.into_dispatch(), b.into_dispatch());
    Ok(Tensor::from_dispatch(if div { Dispatch::float_div(a, b) } else { Dispatch::float_mul(a, b) }))
}

impl Kernel for QuantLinear {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        // Positions: *Integer: a, b, a_zp, b_zp. QLinear*: a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp (, bias).
        let (ia, ib, iaz, ibz) = if self.requant { (0, 3, 2, 5) } else { (0, 1, 2, 3) };
        let a = ins.tensor(ia)?;
        let b = ins.tensor(ib)?;
        check_q(ctx, &a, "A")?;
        check_q(ctx, &b, "B")?;
        let (ash, bsh) = (a.shape(), b.shape());
        if ash.is_empty() || bsh.is_empty() {
            return Err(ctx.err("operands must have rank >= 1"));
        }
        // Per-axis: rows of A (MatMul) or output channels of W (Conv).
        let (a_axis, a_len, b_axis, b_len) = if self.conv {
            (1, ash.get(1).copied().unwrap_or(0), 0, bsh[0])
        } else {
            let ar = ash.len();
            (ar.saturating_sub(2), if ar >= 2 { ash[ar - 2] } else { 1 }, bsh.len() - 1, bsh[bsh.len() - 1])
        };
        let az = ins.opt_tensor(iaz)?.map(|z| per_axis(ctx, z, ash.len(), a_axis, a_len, "A zero point")).transpose()?;
        let bz = ins.opt_tensor(ibz)?.map(|z| per_axis(ctx, z, bsh.len(), b_axis, b_len, "B zero point")).transpose()?;
        let a = shifted(ctx, a, az, "A")?;
        let b = shifted(ctx, b, bz, "B")?;
        let mut acc_ins = vec![Some(a.into()), Some(b.into())];
        if self.conv && self.requant {
            if let Some(bias) = ins.opt_tensor(8)? {
                check_q(ctx, &bias, "bias")?;
                acc_ins.push(Some(bias.cast(DataType::Double)?.into()));
            }
        }
        let acc = self.inner.run(ctx, acc_ins)?;
        let acc = acc.into_iter().next().flatten().and_then(Value::into_tensor).ok_or_else(|| ctx.err("no accumulator"))?;
        if !self.requant {
            return one(acc.cast(DataType::Int32)?);
        }
        let out_rank = acc.rank();
        let out_shape = acc.shape();
        // Output axis that per-axis scales follow: rows (MatMul) / channels (Conv).
        let (ya, yb) = if self.conv { (1, 1) } else { (out_rank.saturating_sub(2), out_rank.saturating_sub(1)) };
        let fetch = |ins: &mut crate::value::Inputs<'_>, i: usize, what: &str| -> Result<Tensor> {
            let t = ins.tensor(i)?;
            if t.kind() != Kind::Float {
                return Err(ctx.err(format!("{what} must be a float tensor")));
            }
            Ok(t)
        };
        let len_at = |ax: usize| out_shape.get(ax).copied().unwrap_or(1);
        let sa = per_axis(ctx, fetch(&mut ins, 1, "A scale")?, out_rank, ya, len_at(ya), "A scale")?;
        let sb = per_axis(ctx, fetch(&mut ins, 4, "B scale")?, out_rank, yb, len_at(yb), "B scale")?;
        let sy = per_axis(ctx, fetch(&mut ins, 6, "Y scale")?, out_rank, ya, len_at(ya), "Y scale")?;
        let yz = ins.tensor(7)?;
        check_q(ctx, &yz, "Y zero point")?;
        let ydt = yz.dtype();
        let (lo, hi) = match ydt {
            DataType::Uint8 => (0.0, 255.0),
            DataType::Int8 => (-128.0, 127.0),
            DataType::Uint16 => (0.0, 65535.0),
            DataType::Int16 => (-32768.0, 32767.0),
            d => return Err(ctx.err(format!("unsupported output type {d}"))),
        };
        let yz = per_axis(ctx, yz, out_rank, ya, len_at(ya), "Y zero point")?.cast(DataType::Double)?;
        // The multiplier in the scales' own precision (as the reference computes it).
        let m = mul(ctx, mul(ctx, sa, sb, false)?, sy, true)?.cast(DataType::Double)?;
        let y = mul(ctx, acc, m, false)?;
        let y = Tensor::from_dispatch(Dispatch::float_round(y.into_dispatch()));
        let y = match broadcast_pair(y, yz) {
            Ok((a, b, s)) if s == out_shape => Dispatch::float_add(a.into_dispatch(), b.into_dispatch()),
            _ => return Err(ctx.err("Y zero point does not broadcast to the output")),
        };
        let y = Dispatch::float_clamp(y, Scalar::from(lo), Scalar::from(hi));
        one(Tensor::from_dispatch(y).cast(ydt)?)
    }
}
