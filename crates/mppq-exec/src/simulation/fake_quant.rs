//! Fake-quantization kernels (quantize then dequantize, result in float) for the simulation
//! hook: linear integer (per-tensor / per-channel, every [`RoundingPolicy`], power-of-2 scale
//! check) and floating (FP8 E4M3FN / E5M2 and generic `(exponent, mantissa)` formats).
//!
//! # Semantics (what every path computes, bit for bit)
//!
//! Linear, per channel `c` with scale `s` and integral offset `o`:
//! `v = x / s` (f32 division), `q = clamp(round(v) + o, quant_min, quant_max)` with `round`
//! exactly [`RoundingPolicy::round`], `y = f32(q − o) · s` (f32 multiply). NaN stays NaN;
//! ±∞ saturate. Zero signs are not part of the contract (`-0.0` may come out as `+0.0`).
//!
//! Floating (symmetric, offset 0): `v = x / s`, `f = fmt(v)`, `y = f · s`, where `fmt` rounds to
//! the nearest value of the format (ties to even mantissa, subnormals below the smallest
//! normal exponent), saturates finite overflow to ±max, then clamps to
//! `[quant_min, quant_max]`. NaN stays NaN; ±∞ stays ±∞ for formats with infinities (E5M2,
//! IEEE-style generic formats) and saturates for E4M3FN (no infinities, max 448).
//!
//! # Paths
//!
//! On the CPU (`flex`) backend, float32 tensors are rewritten in place by one fused loop over
//! the buffer (copy-on-write when the buffer is shared; strided views are made contiguous
//! first). Linear configs whose `[quant_min − o − 1, quant_max − o + 1]` fits in ±2²² use
//! the branch-free magic-number round (`(v + 1.5·2²³) − 1.5·2²³`, ties to even) after
//! clamping `v` into that range (which cannot change the result, since rounding is monotone
//! and the bounds are integers); wider configs (32-bit biases) use the exact f64 scalar
//! rounding. Floating formats with at most 7 exponent and 21 mantissa bits (every FP8 format)
//! use a branch-free f32 kernel (exponent by bit shift, exact power-of-two scalings, magic
//! round); wider ones the exact scalar [`FloatFormat::round`].
//!
//! Every other device (wgpu, autodiff) runs a chain of Burn `Dispatch` operations with the
//! same results: Burn's `round` is ties-to-even; the other policies are composed from `floor`
//! and comparisons with the exact midpoint `floor(v) + 0.5`; floating formats pick each
//! element's quantum with one comparison per binade. That chain clamps in f32, so a 32-bit
//! range saturates at 2³¹ rather than 2³¹ − 1. Autodiff gets no straight-through gradient here
//! (round has zero gradient). Float16/bfloat16/float64 tensors are computed in float32 and cast
//! back.

use super::FakeQuantizer;
use crate::error::{ExecError, Result};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps};
use burn::backend::{
    BackendTensor, Dispatch, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind, TensorMetadata,
};
use burn::tensor::{DType, FloatDType, Scalar, Shape};
use mppq_ir::IrError;
use mppq_ir::lowp::{MiniFloat, round_to_precision};
use mppq_ir::quant::{QuantizationProperty, RoundingPolicy, TensorQuantConfig, block_code, block_value};

/// `1.5 · 2²³`: adding and subtracting it rounds an f32 of magnitude ≤ 2²² to an integer,
/// ties to even (the FPU's rounding mode).
const MAGIC_F32: f32 = 12_582_912.0;
/// Largest magnitude for which the f32 magic round is exact.
const MAGIC_LIMIT: f64 = 4_194_304.0;

/// Fake quantization with the kernels of this module: linear or floating by the config's
/// policy. `QuantSimulation::new(&graph, BurnFakeQuant)` simulates a quantized graph.
#[derive(Clone, Copy, Debug, Default)]
pub struct BurnFakeQuant;

/// The same quantizer under the name used for linear-only setups.
pub type LinearFakeQuant = BurnFakeQuant;

impl FakeQuantizer for BurnFakeQuant {
    fn fake_quant(&self, value: Value, config: &TensorQuantConfig) -> Result<Value> {
        match value {
            Value::Tensor(t) if t.kind() == Kind::Float => Ok(Value::Tensor(fake_quant_tensor(t, config)?)),
            // Integer / bool tensors (shapes, indices: SOI values), low-precision tensors
            // (already quantized), sequences and optionals are never quantized.
            other => Ok(other),
        }
    }
}

/// Which implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelPath {
    /// The fused in-place loop where the backend allows it (CPU float32), else the op chain.
    Auto,
    /// Always the chain of Burn operations (what non-CPU devices run); for tests and timing.
    Chained,
}

/// A floating-point format: `exponent_bits`, `mantissa_bits`, bias `2^(e−1) − 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatFormat {
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    /// Largest finite value.
    pub max: f32,
    /// Whether the format has infinities (E5M2 and IEEE-style formats) or saturates them
    /// (E4M3FN).
    pub has_inf: bool,
}

impl FloatFormat {
    /// E4M3FN: max 448, no infinities, NaN only at S.1111.111.
    pub const E4M3: FloatFormat =
        FloatFormat { exponent_bits: 4, mantissa_bits: 3, max: MiniFloat::E4M3FN.max, has_inf: false };
    /// E5M2: IEEE-style, max 57344, with infinities.
    pub const E5M2: FloatFormat =
        FloatFormat { exponent_bits: 5, mantissa_bits: 2, max: MiniFloat::E5M2.max, has_inf: true };

    /// The format for `(exponent_bits, mantissa_bits)`: E4M3 is the FN variant (the one FP8
    /// hardware and ONNX use), every other pair is IEEE-style (top exponent reserved for ∞/NaN).
    /// Exponent 2–8 and mantissa 0–23 bits (every such format is exact in f32).
    pub fn new(exponent_bits: u32, mantissa_bits: u32) -> Result<Self> {
        if !(2..=8).contains(&exponent_bits) || mantissa_bits > 23 {
            return Err(invalid(format!(
                "floating format E{exponent_bits}M{mantissa_bits}: use 2–8 exponent and 0–23 mantissa bits"
            )));
        }
        if (exponent_bits, mantissa_bits) == (4, 3) {
            return Ok(Self::E4M3);
        }
        let bias = (1i32 << (exponent_bits - 1)) - 1;
        let emax = (1i32 << exponent_bits) - 2 - bias;
        let max = (2.0 - pow2(-(mantissa_bits as i32))) * pow2(emax);
        Ok(Self { exponent_bits, mantissa_bits, max: max as f32, has_inf: true })
    }

    fn bias(&self) -> i32 {
        (1i32 << (self.exponent_bits - 1)) - 1
    }

    /// Exponent of the smallest normal value (subnormals share its quantum).
    pub fn min_exponent(&self) -> i32 {
        1 - self.bias()
    }

    /// Exponent of the largest finite value.
    pub fn max_exponent(&self) -> i32 {
        // max = 1.x · 2^e with 1 ≤ 1.x < 2
        let bits = f64::from(self.max).to_bits();
        ((bits >> 52) & 0x7ff) as i32 - 1023
    }

    /// Rounds `v` to this format (nearest, ties to even; finite overflow saturates to ±max).
    /// The rounding is [`mppq_ir::lowp::round_to_precision`], the one the ONNX FP8 casts use.
    pub fn round(&self, v: f32) -> f32 {
        if v.is_nan() {
            return v;
        }
        if v.is_infinite() {
            return if self.has_inf { v } else { self.max.copysign(v) };
        }
        let r = round_to_precision(f64::from(v.abs()), self.mantissa_bits, self.min_exponent());
        let r = r.min(f64::from(self.max)) as f32;
        r.copysign(v)
    }
}

/// 2^k as f64 for |k| ≤ 1022.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k) as u64) << 52)
}

fn invalid(message: String) -> ExecError {
    ExecError::Ir(IrError::InvalidQuantConfig(message))
}

/// Per-channel (or per-tensor) parameters, checked against a tensor shape.
#[derive(Clone, Debug)]
pub(crate) struct Channels {
    pub(crate) scale: Vec<f32>,
    pub(crate) offset: Vec<f32>,
    /// Row-major split of the shape: (outer, channels, inner).
    split: (usize, usize, usize),
    pub(crate) axis: Option<usize>,
}

#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Linear { ch: Channels, qmin: f64, qmax: f64, rounding: RoundingPolicy },
    Floating { ch: Channels, fmt: FloatFormat, lo: f32, hi: f32 },
}

fn channels(config: &TensorQuantConfig, shape: &[usize]) -> Result<Channels> {
    if config.scale.is_empty() {
        return Err(invalid(format!(
            "config in state {:?} has no scale yet: calibrate it before simulating",
            config.state
        )));
    }
    config.validate()?;
    let numel: usize = shape.iter().product();
    let split = match config.channel_axis {
        None => (1, 1, numel),
        Some(axis) => {
            let Some(&c) = shape.get(axis) else {
                return Err(invalid(format!("channel axis {axis} is out of range for a tensor of shape {shape:?}")));
            };
            if config.scale.len() != c {
                return Err(invalid(format!(
                    "{} per-channel scales for axis {axis} of shape {shape:?} ({c} channels)",
                    config.scale.len()
                )));
            }
            (shape[..axis].iter().product(), c, shape[axis + 1..].iter().product())
        }
    };
    if config.policy.is_power_of_2()
        && let Some(s) = config.scale.iter().find(|s| !is_power_of_two(**s))
    {
        return Err(invalid(format!("power-of-2 policy but scale {s:e} is not a power of two")));
    }
    Ok(Channels { scale: config.scale.clone(), offset: config.offset.clone(), split, axis: config.channel_axis })
}

/// Whether `s` is a positive power of two (normal or subnormal).
pub fn is_power_of_two(s: f32) -> bool {
    s.is_finite() && s > 0.0 && {
        let b = s.to_bits();
        if b >> 23 == 0 { b.is_power_of_two() } else { b & 0x7f_ffff == 0 }
    }
}

pub(crate) fn plan(config: &TensorQuantConfig, shape: &[usize]) -> Result<Plan> {
    if config.policy.has(QuantizationProperty::Dynamic) {
        return Err(ExecError::NotImplemented {
            node: String::new(),
            op_type: "fake quantization".into(),
            feature: "dynamic (run-time range) quantization".into(),
        });
    }
    let ch = channels(config, shape)?;
    if config.policy.is_floating() {
        let fmt = FloatFormat::new(config.exponent_bits, config.mantissa_bits)?;
        let (lo, hi) = (config.quant_min as f64, config.quant_max as f64);
        if hi > f64::from(fmt.max) || lo < -f64::from(fmt.max) {
            return Err(invalid(format!(
                "range [{lo}, {hi}] exceeds the E{}M{} range ±{}",
                fmt.exponent_bits, fmt.mantissa_bits, fmt.max
            )));
        }
        return Ok(Plan::Floating { ch, fmt, lo: lo as f32, hi: hi as f32 });
    }
    if let Some(o) = ch.offset.iter().find(|o| o.fract() != 0.0 || !o.is_finite()) {
        return Err(invalid(format!("offset {o} is not an integer")));
    }
    Ok(Plan::Linear { ch, qmin: config.quant_min as f64, qmax: config.quant_max as f64, rounding: config.rounding })
}

/// Fake-quantizes one float tensor under `config` (fused on the CPU where possible).
pub fn fake_quant_tensor(t: Tensor, config: &TensorQuantConfig) -> Result<Tensor> {
    fake_quant_with(t, config, KernelPath::Auto)
}

/// [`fake_quant_tensor`] with a chosen implementation.
pub fn fake_quant_with(t: Tensor, config: &TensorQuantConfig, path: KernelPath) -> Result<Tensor> {
    // Integers, and FP8/FP4 tensors (their F32 stand-ins hold values that are quantized already).
    if t.kind() != Kind::Float || t.stand_in_for().is_some_and(crate::tensor::is_low_precision) {
        return Ok(t);
    }
    let shape = t.shape();
    if config.block.is_some() {
        return blocked(t, config, &shape);
    }
    let plan = plan(config, &shape)?;
    let dtype = t.dtype();
    let work = t.cast(mppq_ir::DataType::Float)?;
    let mut inner = work.into_dispatch();
    if path == KernelPath::Auto {
        let (back, done) = fused(inner, &plan);
        if done {
            return within_pair_limit(Tensor::from_dispatch(back), config, &shape).cast(dtype);
        }
        inner = back;
    }
    within_pair_limit(Tensor::from_dispatch(chained(inner, &plan, &shape)), config, &shape).cast(dtype)
}

/// A block-wise weight ([`mppq_ir::quant::block`]), on the host on every device (weights are
/// constants, simulated once and memoized): each element's code as ONNX Runtime's block
/// quantizer finds it ([`mppq_ir::quant::block_code`]), dequantized with its block's parameters.
fn blocked(t: Tensor, config: &TensorQuantConfig, shape: &[usize]) -> Result<Tensor> {
    if config.scale.is_empty() {
        return Err(invalid(format!(
            "block-wise config in state {:?} has no scale yet: calibrate it first",
            config.state
        )));
    }
    config.validate()?;
    let grid = config.block_grid(shape)?.ok_or_else(|| invalid("block-wise config without a channel axis".into()))?;
    let mut values = t.to_f32_vec();
    for c in 0..grid.channels {
        for k in 0..grid.run {
            let (i, p) = (grid.index(c, k), grid.param(c, k));
            let (s, o) = (config.scale[p], config.offset[p]);
            values[i] = block_value(block_code(values[i], s, o, config.quant_min, config.quant_max), s, o);
        }
    }
    let dtype = t.dtype();
    t.like_f32(shape, values).cast(dtype)
}

/// The fake-quantized weight `t` (float32) with its codes kept within the config's
/// [`PairLimit`](mppq_ir::quant::PairLimit) (weights for x86 CPUs without VNNI): codes recovered
/// per channel (`y / s` is the code exactly), settled, dequantized as the kernels above do. Only
/// symmetric configs (zero point 0) have pairs to limit.
fn within_pair_limit(t: Tensor, config: &TensorQuantConfig, shape: &[usize]) -> Tensor {
    let Some(limit) = &config.pair_limit else { return t };
    let runs = mppq_ir::quant::pair_limit::ChannelRuns::new(shape, config.channel_axis, config.scale.len());
    let Some(runs) = runs.filter(|_| config.offset.iter().all(|o| *o == 0.0) && limit.fits(shape)) else {
        return t;
    };
    let values = t.to_f32_vec();
    let range = (config.quant_min, config.quant_max);
    let codes = mppq_ir::quant::pair_limit::channel_codes(
        &values,
        shape,
        config.channel_axis,
        &config.scale,
        range,
        f32::round,
    );
    let Some(mut codes) = codes else { return t };
    let before = codes.clone();
    if limit.apply(&mut codes, shape) == 0 {
        return t;
    }
    // Only the settled codes are rewritten (a NaN weight stays NaN).
    let mut settled = values;
    runs.each(|range, c| {
        for i in range {
            if codes[i] != before[i] {
                settled[i] = codes[i] as f32 * config.scale[c];
            }
        }
    });
    t.like_f32(shape, settled)
}

/// Runs the fused kernel in place when `t` is a plain (non-autodiff) flex float32 tensor;
/// gives `t` back unchanged otherwise. The flag says whether it ran.
fn fused(t: DispatchTensor, plan: &Plan) -> (DispatchTensor, bool) {
    match t {
        DispatchTensor {
            kind: DispatchTensorKind::Flex(BackendTensor::Float(mut ft)),
            autodiff: DispatchAutodiffContext::Disabled,
        } if ft.dtype() == DType::F32 => {
            if !(ft.is_contiguous() && ft.layout().start_offset() == 0) {
                ft = ft.to_contiguous();
            }
            let n = ft.layout().num_elements();
            let ok = ft.is_contiguous() && ft.layout().start_offset() == 0 && {
                // Copy-on-write: in place when this is the only owner of the buffer.
                let buf = ft.storage_mut::<f32>();
                match buf.get_mut(..n) {
                    Some(buf) => {
                        run_plan(buf, plan);
                        true
                    }
                    None => false,
                }
            };
            let t = DispatchTensor {
                kind: DispatchTensorKind::Flex(BackendTensor::Float(ft)),
                autodiff: DispatchAutodiffContext::Disabled,
            };
            (t, ok)
        }
        other => (other, false),
    }
}

/// Applies `plan` to a contiguous row-major float32 buffer of the planned shape.
fn run_plan(buf: &mut [f32], plan: &Plan) {
    match plan {
        Plan::Linear { ch, qmin, qmax, rounding } => {
            fake_quant_linear_slice(buf, ch.split, &ch.scale, &ch.offset, *qmin, *qmax, *rounding)
        }
        Plan::Floating { ch, fmt, lo, hi } => fake_quant_float_slice(buf, ch.split, &ch.scale, *fmt, *lo, *hi),
    }
}

/// Iterates `(values of one channel run, channel index)` over a row-major buffer split
/// `(outer, channels, inner)`.
fn for_channels(buf: &mut [f32], (_, c, inner): (usize, usize, usize), mut f: impl FnMut(&mut [f32], usize)) {
    if inner == 0 || c == 0 {
        return;
    }
    for (i, run) in buf.chunks_mut(inner).enumerate() {
        f(run, i % c);
    }
}

#[inline(always)]
fn clampf(v: f32, lo: f32, hi: f32) -> f32 {
    // NaN passes through (both comparisons are false).
    let v = if v < lo { lo } else { v };
    if v > hi { hi } else { v }
}

#[inline(always)]
fn rne_fast(v: f32) -> f32 {
    (v + MAGIC_F32) - MAGIC_F32
}

/// Floor for |v| ≤ 2²² from the ties-to-even round.
#[inline(always)]
fn floor_fast(v: f32) -> f32 {
    let r = rne_fast(v);
    if r > v { r - 1.0 } else { r }
}

/// The fused linear kernel on a contiguous buffer (per-tensor: split `(1, 1, n)`).
/// Public for benchmarks and host-side use; `scale.len() == offset.len() == split.1`.
pub fn fake_quant_linear_slice(
    buf: &mut [f32],
    split: (usize, usize, usize),
    scale: &[f32],
    offset: &[f32],
    qmin: f64,
    qmax: f64,
    rounding: RoundingPolicy,
) {
    let fast = qmin.abs() <= MAGIC_LIMIT / 2.0
        && qmax.abs() <= MAGIC_LIMIT / 2.0
        && offset.iter().all(|o| f64::from(o.abs()) <= MAGIC_LIMIT / 2.0);
    if !fast {
        for_channels(buf, split, |run, c| {
            let (s, o) = (scale.get(c).copied().unwrap_or(1.0), offset.get(c).copied().unwrap_or(0.0));
            for x in run.iter_mut() {
                *x = linear_exact(*x, s, o, qmin, qmax, rounding);
            }
        });
        return;
    }
    use RoundingPolicy::*;
    macro_rules! kernel {
        ($round:expr) => {
            for_channels(buf, split, |run, c| {
                let (s, o) = (scale.get(c).copied().unwrap_or(1.0), offset.get(c).copied().unwrap_or(0.0));
                let (qlo, qhi) = (qmin as f32, qmax as f32);
                // Integers, |·| ≤ 2²²: clamping v into them first keeps the magic round valid
                // and cannot change the clamped result.
                let (lo, hi) = (qlo - o - 1.0, qhi - o + 1.0);
                let round = $round;
                for x in run.iter_mut() {
                    let v = clampf(*x / s, lo, hi);
                    let q = clampf(round(v) + o, qlo, qhi);
                    *x = (q - o) * s;
                }
            })
        };
    }
    match rounding {
        HalfEven => kernel!(|v: f32| rne_fast(v).copysign(v)),
        Floor => kernel!(floor_fast),
        Ceil => kernel!(|v: f32| {
            let t = floor_fast(v);
            if v > t { t + 1.0 } else { t }
        }),
        // Compare with the exact midpoint t + 0.5 (|t| ≤ 2²² + 1): `v − t` is not exact for
        // v in (−1, 0).
        HalfUp => kernel!(|v: f32| {
            let t = floor_fast(v);
            if v >= t + 0.5 { t + 1.0 } else { t }
        }),
        HalfDown => kernel!(|v: f32| {
            let t = floor_fast(v);
            if v > t + 0.5 { t + 1.0 } else { t }
        }),
        HalfAwayFromZero => kernel!(|v: f32| {
            let t = floor_fast(v);
            let mid = t + 0.5;
            if v > mid || (v == mid && v > 0.0) { t + 1.0 } else { t }
        }),
        HalfTowardsZero => kernel!(|v: f32| {
            let t = floor_fast(v);
            let mid = t + 0.5;
            if v > mid || (v == mid && v < 0.0) { t + 1.0 } else { t }
        }),
    }
}

/// The scalar linear fake-quant, exact for any range (the reference the kernels follow).
pub fn linear_exact(x: f32, s: f32, o: f32, qmin: f64, qmax: f64, rounding: RoundingPolicy) -> f32 {
    let v = x / s;
    if v.is_nan() {
        return v;
    }
    let q = rounding.round(f64::from(v)) + f64::from(o);
    // Not f64::clamp, which panics on a reversed range.
    let q = if q < qmin {
        qmin
    } else if q > qmax {
        qmax
    } else {
        q
    };
    ((q - f64::from(o)) as f32) * s
}

/// The fused floating kernel on a contiguous buffer: `y = fmt(x / s)` clamped to `[lo, hi]`,
/// times `s`.
pub fn fake_quant_float_slice(
    buf: &mut [f32],
    split: (usize, usize, usize),
    scale: &[f32],
    fmt: FloatFormat,
    lo: f32,
    hi: f32,
) {
    let Some(fast) = FastFormat::new(fmt) else {
        for_channels(buf, split, |run, c| {
            let s = scale.get(c).copied().unwrap_or(1.0);
            for x in run.iter_mut() {
                *x = float_exact(*x, s, fmt, lo, hi);
            }
        });
        return;
    };
    for_channels(buf, split, |run, c| {
        let s = scale.get(c).copied().unwrap_or(1.0);
        for x in run.iter_mut() {
            let f = fast.round(*x / s);
            let f = if f.abs() == f32::INFINITY { f } else { clampf(f, lo, hi) };
            *x = f * s;
        }
    });
}

/// Branch-free f32 rounding to a format whose quanta are normal f32 powers of two
/// (exponent ≤ 7 bits, mantissa ≤ 21 bits: every FP8 format).
#[derive(Clone, Copy)]
struct FastFormat {
    m: u32,
    /// Smallest normal value of the format (subnormals share its quantum).
    min_normal: f32,
    /// One binade above the largest exponent: larger values saturate anyway, and capping
    /// there keeps the scalings normal.
    cap: f32,
    max: f32,
    /// What ±∞ becomes (before the sign): ∞ or max.
    inf: f32,
}

impl FastFormat {
    fn new(fmt: FloatFormat) -> Option<Self> {
        (fmt.exponent_bits <= 7 && fmt.mantissa_bits <= 21).then(|| Self {
            m: fmt.mantissa_bits,
            min_normal: pow2(fmt.min_exponent()) as f32,
            cap: pow2(fmt.max_exponent() + 1) as f32,
            max: fmt.max,
            inf: if fmt.has_inf { f32::INFINITY } else { fmt.max },
        })
    }

    #[inline(always)]
    fn round(&self, v: f32) -> f32 {
        let a = v.abs();
        // Biased exponent of a, clamped to the format's binades (selects and a shift only, so
        // the loop vectorizes); NaN gives 255 and stays NaN through the arithmetic.
        let field = clampf(a, self.min_normal, self.cap).to_bits() >> 23;
        // 2^(m − e) and 2^(e − m): both normal (e ∈ [−62, 65], m ≤ 21), so the scalings are
        // exact, and a · 2^(m − e) < 2^(m+1) ≤ 2^22 keeps the magic round valid below the
        // cap; above it the result is far beyond max and saturates.
        let up = f32::from_bits((254 + self.m).wrapping_sub(field) << 23);
        let down = f32::from_bits(field.wrapping_sub(self.m) << 23);
        let r = rne_fast(a * up) * down;
        let r = if r > self.max { self.max } else { r }; // NaN passes
        let r = if a == f32::INFINITY { self.inf } else { r };
        r.copysign(v)
    }
}

/// The scalar floating fake-quant.
pub fn float_exact(x: f32, s: f32, fmt: FloatFormat, lo: f32, hi: f32) -> f32 {
    let f = fmt.round(x / s);
    let f = if f.is_infinite() { f } else { clampf(f, lo, hi) };
    f * s
}

// ---------------------------------------------------------------------------------------
// The op chain (every backend).

fn per_channel(values: &[f32], ch: &Channels, shape: &[usize], like: &DispatchTensor) -> DispatchTensor {
    let device = like.device();
    let rank = shape.len();
    let mut pshape = vec![1usize; rank];
    if let Some(axis) = ch.axis {
        pshape[axis] = values.len();
    }
    let data = burn::tensor::TensorData::new(values.to_vec(), Shape::from(pshape));
    let p = Dispatch::float_from_data(data, &device);
    let p = Dispatch::float_cast(p, FloatDType::F32);
    Dispatch::float_expand(p, Shape::from(shape.to_vec()))
}

/// `x op param` with the per-tensor parameter as a scalar, per-channel as a broadcast tensor.
fn with_param(
    x: DispatchTensor,
    values: &[f32],
    ch: &Channels,
    shape: &[usize],
    scalar_op: fn(DispatchTensor, Scalar) -> DispatchTensor,
    tensor_op: fn(DispatchTensor, DispatchTensor) -> DispatchTensor,
) -> DispatchTensor {
    match (ch.axis, values) {
        (None, [v]) => scalar_op(x, Scalar::from(f64::from(*v))),
        _ => {
            let p = per_channel(values, ch, shape, &x);
            tensor_op(x, p)
        }
    }
}

pub(crate) fn chained(x: DispatchTensor, plan: &Plan, shape: &[usize]) -> DispatchTensor {
    match plan {
        Plan::Linear { ch, qmin, qmax, rounding } => {
            let v = with_param(x, &ch.scale, ch, shape, Dispatch::float_div_scalar, Dispatch::float_div);
            let nan = Dispatch::float_is_nan(v.clone(), crate::tensor::bool_for(&v));
            let r = round_chain(v.clone(), *rounding);
            let q = with_param(r, &ch.offset, ch, shape, Dispatch::float_add_scalar, Dispatch::float_add);
            let q = Dispatch::float_clamp(q, Scalar::from(*qmin), Scalar::from(*qmax));
            let d = with_param(q, &ch.offset, ch, shape, Dispatch::float_sub_scalar, Dispatch::float_sub);
            let y = with_param(d, &ch.scale, ch, shape, Dispatch::float_mul_scalar, Dispatch::float_mul);
            // Keep NaN whatever the backend's clamp does with it.
            Dispatch::float_mask_where(y, nan, v)
        }
        Plan::Floating { ch, fmt, lo, hi } => {
            let v = with_param(x, &ch.scale, ch, shape, Dispatch::float_div_scalar, Dispatch::float_div);
            let f = float_chain(v, *fmt, *lo, *hi);
            with_param(f, &ch.scale, ch, shape, Dispatch::float_mul_scalar, Dispatch::float_mul)
        }
    }
}

/// Rounds by `policy` with Burn ops, exactly: `floor`, `ceil`, `round` (ties to even) and
/// comparisons only.
pub(crate) fn round_chain(v: DispatchTensor, policy: RoundingPolicy) -> DispatchTensor {
    use RoundingPolicy::*;
    let up = |t: DispatchTensor, mask: DispatchTensor| {
        Dispatch::float_add(t, Dispatch::bool_into_float(mask, FloatDType::F32))
    };
    match policy {
        HalfEven => Dispatch::float_round(v),
        Floor => Dispatch::float_floor(v),
        Ceil => Dispatch::float_ceil(v),
        _ => {
            // Compare with the midpoint t + 0.5 (not with v − t, which is inexact for v in
            // (−1, 0)). Above 2²³ the midpoint rounds, but there v is an integer (v == t), so a
            // tie also requires v != t.
            let t = Dispatch::float_floor(v.clone());
            let mid = Dispatch::float_add_scalar(t.clone(), Scalar::from(0.5));
            let gt = Dispatch::float_greater(v.clone(), mid.clone(), crate::tensor::bool_for(&v));
            let tie = Dispatch::bool_and(
                Dispatch::float_equal(v.clone(), mid, crate::tensor::bool_for(&v)),
                Dispatch::float_not_equal(v.clone(), t.clone(), crate::tensor::bool_for(&v)),
            );
            let mask = match policy {
                HalfUp => Dispatch::bool_or(gt, tie),
                HalfDown => gt,
                _ => {
                    let side = if policy == HalfAwayFromZero {
                        {
                            let bd = crate::tensor::bool_for(&v);
                            Dispatch::float_greater_elem(v, Scalar::from(0.0), bd)
                        }
                    } else {
                        {
                            let bd = crate::tensor::bool_for(&v);
                            Dispatch::float_lower_elem(v, Scalar::from(0.0), bd)
                        }
                    };
                    Dispatch::bool_or(gt, Dispatch::bool_and(tie, side))
                }
            };
            up(t, mask)
        }
    }
}

/// Rounds to `fmt` with Burn ops: the quantum `2^(e−m)` of each element is picked by a ladder
/// of comparisons against the binade bounds (exact on every backend; one step per binade).
fn float_chain(v: DispatchTensor, fmt: FloatFormat, lo: f32, hi: f32) -> DispatchTensor {
    let m = fmt.mantissa_bits as i32;
    let shape = v.shape();
    let device = v.device();
    let a = Dispatch::float_abs(v.clone());
    let emin = fmt.min_exponent();
    let mut quantum = Dispatch::float_full(shape, Scalar::from(pow2(emin - m)), &device, FloatDType::F32);
    for k in emin + 1..=fmt.max_exponent() {
        let mask = Dispatch::float_greater_equal_elem(a.clone(), Scalar::from(pow2(k)), crate::tensor::bool_for(&a));
        quantum = Dispatch::float_mask_fill(quantum, mask, Scalar::from(pow2(k - m)));
    }
    let r = Dispatch::float_mul(Dispatch::float_round(Dispatch::float_div(a, quantum.clone())), quantum);
    let r = Dispatch::float_clamp_max(r, Scalar::from(f64::from(fmt.max)));
    let neg = Dispatch::float_lower_elem(v.clone(), Scalar::from(0.0), crate::tensor::bool_for(&v));
    let y = Dispatch::float_mask_where(r.clone(), neg, Dispatch::float_neg(r.clone()));
    // Zeros keep the input's sign (v · 0 is ±0).
    let zero = Dispatch::float_equal_elem(r, Scalar::from(0.0), crate::tensor::bool_for(&v));
    let y = Dispatch::float_mask_where(y, zero, Dispatch::float_mul_scalar(v.clone(), Scalar::from(0.0)));
    let y = Dispatch::float_clamp(y, Scalar::from(f64::from(lo)), Scalar::from(f64::from(hi)));
    let nan = Dispatch::float_is_nan(v.clone(), crate::tensor::bool_for(&v));
    let y = if fmt.has_inf {
        let inf = Dispatch::float_is_inf(v.clone(), crate::tensor::bool_for(&v));
        Dispatch::float_mask_where(y, inf, v.clone())
    } else {
        y
    };
    Dispatch::float_mask_where(y, nan, v)
}
