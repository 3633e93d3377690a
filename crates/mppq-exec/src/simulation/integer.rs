//! Integer-exact simulation of the operations ONNX Runtime fuses from QDQ into integer kernels
//! (QLinearConv, QLinearMatMul, QLinearAdd, QLinearMul, QLinearSigmoid; int8 engines in general
//! for the convolutions): what the runtime computes instead of float math on dequantized values.
//!
//! An integer kernel accumulates `(q_x − z_x)·q_w` exactly in int32, adds the int32 bias, and
//! requantizes once with a float multiplier `m[c] = s_x·s_w[c] / s_y` (float32, in that order):
//! `q_y = clamp(round_half_even(acc·m[c]), q_min − z_y, q_max − z_y) + z_y`. Float math on
//! dequantized values is the same up to float rounding (~1e-6 relative), which is enough to move
//! values lying that close to a rounding boundary by one step; through a deep network those
//! flips add up (ResNet-18: 0.4 % of the logits more than one step from ONNX Runtime). So
//! when a Conv's input, weight, bias and output are all linearly quantized, the simulation feeds
//! the kernel the integer codes (exact in float32 while partial sums stay below 2²⁴) and
//! requantizes its output the way the runtime does.

use crate::error::{ExecError, Result};
use crate::kernel::IntegerCodes;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use mppq_ir::quant::{OperationQuantConfig, QuantizationState, RoundingPolicy, TensorQuantConfig};

/// How one Conv is simulated on the integer path.
#[derive(Clone, Debug)]
pub struct IntegerConv {
    x_scale: f32,
    /// Bounds of the centred input code (`q_min − z_x ..= q_max − z_x`): a value that reaches the
    /// Conv off its grid saturates, as the runtime's Q in front of it does.
    x_lo: f32,
    x_hi: f32,
    /// Per output channel (or one for all): weight and bias scales.
    w_scale: Vec<f32>,
    b_scale: Option<Vec<f32>>,
    /// Requantization multiplier per output channel (or one), float32 as the runtime has it.
    multiplier: Vec<f32>,
    y_scale: f32,
    /// Bounds of the centred output code: `q_min − z_y ..= q_max − z_y`.
    lo: f32,
    hi: f32,
}

/// A config whose parameters hold for the tensor: applied here, or applied by the config that
/// overlaps it (which copies its parameters in).
fn holds(c: &TensorQuantConfig) -> bool {
    let state_ok = c.state.is_active()
        || matches!(
            c.state,
            QuantizationState::Overlapped | QuantizationState::Baked | QuantizationState::PassiveBaked
        );
    state_ok && !c.policy.is_floating() && !c.scale.is_empty() && c.scale.len() == c.offset.len()
}

fn per_tensor(c: &TensorQuantConfig) -> bool {
    c.scale.len() == 1
}

/// An activation an 8-bit integer kernel reads or writes: the full uint8 or int8 range. (A
/// narrower range is exported with a Clip between the operation and its Q, which runtimes do not
/// fuse: they compute such an operation in float.)
fn full_8bit(c: &TensorQuantConfig) -> bool {
    matches!((c.quant_min, c.quant_max), (0, 255) | (-128, 127))
}

impl IntegerConv {
    /// The plan for a Conv whose configs allow the integer path; `None` keeps the float path
    /// (an unquantized input, weight, bias or output; FP8; per-channel or sub-8-bit
    /// activations; or a rounding other than half-even, which integer runtimes do not use).
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        if op_type != "Conv" {
            return None;
        }
        let x = config.input_configs.first()?.as_ref().filter(|c| holds(c) && per_tensor(c) && full_8bit(c))?;
        // One zero point for every channel (0 for int8 weights, 128 for uint8 ones): the kernel
        // multiplies the centred codes, which `integer_inputs` recovers either way.
        let w =
            config.input_configs.get(1)?.as_ref().filter(|c| holds(c) && c.offset.windows(2).all(|p| p[0] == p[1]))?;
        let b = match config.input_configs.get(2) {
            Some(Some(c)) if holds(c) && c.num_of_bits > 16 => Some(c.scale.clone()),
            Some(Some(_)) => return None,
            _ => None,
        };
        let y = config
            .output_configs
            .first()?
            .as_ref()
            .filter(|c| holds(c) && per_tensor(c) && full_8bit(c) && c.rounding == RoundingPolicy::HalfEven)?;
        let (x_scale, y_scale, y_zero) = (x.scale[0], y.scale[0], y.offset[0]);
        let multiplier = w.scale.iter().map(|sw| x_scale * sw / y_scale).collect();
        Some(Self {
            x_scale,
            x_lo: x.quant_min as f32 - x.offset[0],
            x_hi: x.quant_max as f32 - x.offset[0],
            w_scale: w.scale.clone(),
            b_scale: b,
            multiplier,
            y_scale,
            lo: (y.quant_min as f32) - y_zero,
            hi: (y.quant_max as f32) - y_zero,
        })
    }

    /// Replaces the (already fake-quantized) inputs by their integer codes: `x/s_x`, `w/s_w[c]`,
    /// `b/s_b[c]`, each rounded to remove the ulps of the division.
    pub fn integer_inputs(&self, inputs: &mut [Option<Value>]) -> Result<()> {
        let scales: [Option<&[f32]>; 3] =
            [Some(std::slice::from_ref(&self.x_scale)), Some(&self.w_scale), self.b_scale.as_deref()];
        for (i, (slot, scale)) in inputs.iter_mut().zip(scales).enumerate() {
            let (Some(scale), Some(Value::Tensor(t))) = (scale, slot.as_ref()) else { continue };
            let (lo, hi) = if i == 0 { (self.x_lo, self.x_hi) } else { (f32::MIN, f32::MAX) };
            *slot = Some(Value::Tensor(map_channels(t, 0, scale, |v, s| (v / s).round_ties_even().clamp(lo, hi))?));
        }
        Ok(())
    }

    /// What the convolution kernel is told of its inputs' codes: the offset that brings the
    /// centred input codes (`x_lo..=x_hi`, 256 values) into 0..=255.
    pub fn integer_codes(&self) -> Option<IntegerCodes> {
        let offset = -self.x_lo;
        (offset.fract() == 0.0 && (0.0..=255.0).contains(&offset) && self.x_hi - self.x_lo == 255.0)
            .then_some(IntegerCodes { input_offset: offset as u8 })
    }

    /// Turns the kernel's integer accumulator (output 0, channels on axis 1) into the runtime's
    /// requantized result, dequantized: `clamp(rne(acc·m[c]), lo, hi) · s_y`.
    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        let Some(Some(Value::Tensor(acc))) = outputs.first() else { return Ok(()) };
        let (lo, hi, sy) = (self.lo, self.hi, self.y_scale);
        let y = map_channels(acc, 1, &self.multiplier, |v, m| (v * m).clamp(lo, hi).round_ties_even() * sy)?;
        outputs[0] = Some(Value::Tensor(y));
        Ok(())
    }
}

/// The input and output configs of a `want` operation whose two inputs and output are 8-bit
/// per-tensor linear of one signedness, rounding half to even: what ORT fuses into its QLinear
/// binary kernels.
fn binary_8bit<'a>(
    want: &str,
    op_type: &str,
    config: &'a OperationQuantConfig,
) -> Option<(&'a TensorQuantConfig, &'a TensorQuantConfig, &'a TensorQuantConfig)> {
    if op_type != want || config.input_configs.len() != 2 {
        return None;
    }
    let eight_bit = |c: &&TensorQuantConfig| holds(c) && per_tensor(c) && full_8bit(c);
    let a = config.input_configs[0].as_ref().filter(eight_bit)?;
    let b = config.input_configs[1].as_ref().filter(eight_bit)?;
    let y =
        config.output_configs.first()?.as_ref().filter(|c| eight_bit(c) && c.rounding == RoundingPolicy::HalfEven)?;
    ((a.quant_min, b.quant_min) == (y.quant_min, y.quant_min)).then_some((a, b, y))
}

/// How one Add of two quantized tensors is simulated: as ONNX Runtime's QLinearAdd computes it
/// on x86-64 (MLAS's AVX2 kernel, used on every CPU with AVX2 and FMA): with `r_a = s_a/s_y`,
/// `r_b = s_b/s_y` and `f = z_y − fma(r_a, z_a, r_b·z_b)` in float32, `q_y = sat(rne(fma(q_a,
/// r_a, fma(q_b, r_b, f))))` on the raw codes (each fma rounds once). Where input A is a single
/// value along the innermost dimension (a broadcast `[C, 1]`-like A), ORT hands the kernel B as
/// the streamed input and A as the scalar: the roles swap. Dequantize-add-quantize rounds
/// differently on values within an ulp of a rounding boundary (0.01 % of a residual Add's
/// outputs in a CRNN), and unfused float rounding (no fma) still on a few per million: enough,
/// through a deep network, to move whole regions of the output by a step.
#[derive(Clone, Debug)]
pub struct IntegerAdd {
    a: (f32, f32),
    b: (f32, f32),
    ratio_a: f32,
    ratio_b: f32,
    y_scale: f32,
    y_zero: f32,
    lo: f32,
    hi: f32,
}

impl IntegerAdd {
    /// The plan for an Add whose two inputs and output are 8-bit per-tensor linear (ORT fuses
    /// exactly those into QLinearAdd).
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        let (a, b, y) = binary_8bit("Add", op_type, config)?;
        let (sa, za, sb, zb, sy, zy) = (a.scale[0], a.offset[0], b.scale[0], b.offset[0], y.scale[0], y.offset[0]);
        Some(Self {
            a: (sa, za),
            b: (sb, zb),
            ratio_a: sa / sy,
            ratio_b: sb / sy,
            y_scale: sy,
            y_zero: zy,
            lo: y.quant_min as f32,
            hi: y.quant_max as f32,
        })
    }

    /// MLAS's kernel on codes `q_x` (streamed, ratio `r_x`, zero point `z_x`) and `q_s` (ratio
    /// `r_s`, zero point `z_s`): `fma(q_x, r_x, fma(q_s, r_s, z_y − fma(r_x, z_x, r_s·z_s)))`.
    fn kernel(&self, (qx, rx, zx): (f32, f32, f32), (qs, rs, zs): (f32, f32, f32)) -> f32 {
        let fixed = self.y_zero - rx.mul_add(zx, rs * zs);
        qx.mul_add(rx, qs.mul_add(rs, fixed))
    }

    /// Computes the runtime's unrounded sum (broadcast to the output shape) into input 0 and
    /// zeros into input 1, so the Add kernel passes it through unchanged.
    pub fn integer_inputs(&self, inputs: &mut [Option<Value>]) -> Result<()> {
        let (Some(Some(Value::Tensor(a))), Some(Some(Value::Tensor(b)))) = (inputs.first(), inputs.get(1)) else {
            return Ok(());
        };
        let (sa, sb) = (a.shape(), b.shape());
        let fail =
            |message: String| ExecError::Op { node: "integer simulation".into(), op_type: "Add".into(), message };
        let zeros = b.zeros_like();
        let (a_full, b_full, out) = crate::tensor::broadcast_pair(a.clone(), b.clone())
            .map_err(|(x, y)| fail(format!("shapes {x:?} and {y:?} do not broadcast")))?;
        let a_streamed = !a_scalar_per_span(&sa, &sb, &out);
        let (lo, hi) = (self.lo, self.hi);
        // A value outside its grid (not quantized upstream) saturates, as the runtime's Q before the Add does.
        let code = |v: f32, (s, z): (f32, f32)| grid_code(v, s, z, lo, hi);
        let (a_values, b_values) = (a_full.to_f32_vec(), b_full.to_f32_vec());
        let values = crate::cpu::elementwise::map2(&a_values, &b_values, |va, vb| {
            let qa = (code(va, self.a), self.ratio_a, self.a.1);
            let qb = (code(vb, self.b), self.ratio_b, self.b.1);
            if a_streamed { self.kernel(qa, qb) } else { self.kernel(qb, qa) }
        });
        inputs[0] = Some(Value::Tensor(a.like_f32(&out, values)));
        inputs[1] = Some(Value::Tensor(zeros));
        Ok(())
    }

    /// The sum becomes the saturated code, dequantized.
    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        let Some(Some(Value::Tensor(sum))) = outputs.first() else { return Ok(()) };
        let (lo, hi, zy, sy) = (self.lo, self.hi, self.y_zero, self.y_scale);
        let y = map_values(sum, |v| (v.round_ties_even().clamp(lo, hi) - zy) * sy)?;
        outputs[0] = Some(Value::Tensor(y));
        Ok(())
    }
}

/// How one Mul of two quantized tensors is simulated: as ONNX Runtime's QLinearMul computes it
/// (MLAS, x86-64: SSE2, no fused multiply-add): the centred codes multiply exactly in int32,
/// `q_y = sat(rne(acc·m + z_y))` with `m = s_a·s_b/s_y` in float32, in that order. Float math on
/// dequantized values rounds differently within an ulp of a boundary (0.02 % of a hard-swish
/// product in PP-OCRv4 rec, which the network then amplifies).
#[derive(Clone, Debug)]
pub struct IntegerMul {
    a: (f32, f32),
    b: (f32, f32),
    multiplier: f32,
    y_scale: f32,
    y_zero: f32,
    lo: f32,
    hi: f32,
}

impl IntegerMul {
    /// The plan for a Mul whose two inputs and output are 8-bit per-tensor linear (ORT fuses
    /// exactly those into QLinearMul).
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        let (a, b, y) = binary_8bit("Mul", op_type, config)?;
        let (sy, zy) = (y.scale[0], y.offset[0]);
        Some(Self {
            a: (a.scale[0], a.offset[0]),
            b: (b.scale[0], b.offset[0]),
            multiplier: a.scale[0] * b.scale[0] / sy,
            y_scale: sy,
            y_zero: zy,
            lo: y.quant_min as f32,
            hi: y.quant_max as f32,
        })
    }

    /// Replaces both inputs by their centred codes `q − z` (saturated at the grid, as the
    /// runtime's Q in front of the fused kernel does); their product is exact in float32.
    pub fn integer_inputs(&self, inputs: &mut [Option<Value>]) -> Result<()> {
        let (lo, hi) = (self.lo, self.hi);
        for (slot, (s, z)) in inputs.iter_mut().zip([self.a, self.b]) {
            if let Some(Value::Tensor(t)) = slot.as_ref() {
                let centred = map_values(t, |v| grid_code(v, s, z, lo, hi) - z)?;
                *slot = Some(Value::Tensor(centred));
            }
        }
        Ok(())
    }

    /// The integer product becomes the saturated code, dequantized.
    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        let Some(Some(Value::Tensor(acc))) = outputs.first() else { return Ok(()) };
        let (m, lo, hi, zy, sy) = (self.multiplier, self.lo, self.hi, self.y_zero, self.y_scale);
        let y = map_values(acc, |v| ((v * m + zy).round_ties_even().clamp(lo, hi) - zy) * sy)?;
        outputs[0] = Some(Value::Tensor(y));
        Ok(())
    }
}

/// How one MatMul is simulated on the integer path: as ONNX Runtime's QLinearMatMul computes
/// it: centred codes `(q_a − z_a)·(q_b − z_b[n])` accumulated exactly, requantized with
/// `m[n] = s_a·s_b[n]/s_y` per output column (float32, in that order), as for a Conv.
#[derive(Clone, Debug)]
pub struct IntegerMatMul {
    a: (f32, f32),
    /// Per column of B (or one): scale and zero point.
    b_scale: Vec<f32>,
    b_zero: Vec<f32>,
    multiplier: Vec<f32>,
    y_scale: f32,
    /// Input code bounds (`q_min ..= q_max` of A and of B) and centred output bounds.
    a_range: (f32, f32),
    b_range: (f32, f32),
    lo: f32,
    hi: f32,
}

impl IntegerMatMul {
    /// The plan for a MatMul of an 8-bit per-tensor A and an 8-bit B (per tensor, or per
    /// column of a 2-D B) to an 8-bit per-tensor output: what ORT fuses into QLinearMatMul.
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        if op_type != "MatMul" || config.input_configs.len() != 2 {
            return None;
        }
        let eight_bit = |c: &&TensorQuantConfig| holds(c) && full_8bit(c);
        let a = config.input_configs[0].as_ref().filter(|c| eight_bit(c) && per_tensor(c))?;
        let b = config.input_configs[1]
            .as_ref()
            .filter(|c| eight_bit(c) && (per_tensor(c) || c.channel_axis == Some(1)))?;
        let y = config
            .output_configs
            .first()?
            .as_ref()
            .filter(|c| eight_bit(c) && per_tensor(c) && c.rounding == RoundingPolicy::HalfEven)?;
        let (sa, sy, zy) = (a.scale[0], y.scale[0], y.offset[0]);
        Some(Self {
            a: (sa, a.offset[0]),
            b_scale: b.scale.clone(),
            b_zero: b.offset.clone(),
            multiplier: b.scale.iter().map(|sb| sa * sb / sy).collect(),
            y_scale: sy,
            a_range: (a.quant_min as f32, a.quant_max as f32),
            b_range: (b.quant_min as f32, b.quant_max as f32),
            lo: y.quant_min as f32 - zy,
            hi: y.quant_max as f32 - zy,
        })
    }

    /// Replaces A and B by their centred codes (saturated at their grids); B's per-column
    /// parameters run along its last axis.
    pub fn integer_inputs(&self, inputs: &mut [Option<Value>]) -> Result<()> {
        if let Some(Some(Value::Tensor(t))) = inputs.first() {
            let ((s, z), (lo, hi)) = (self.a, self.a_range);
            let centred = map_values(t, |v| grid_code(v, s, z, lo, hi) - z)?;
            inputs[0] = Some(Value::Tensor(centred));
        }
        if let Some(Some(Value::Tensor(t))) = inputs.get(1) {
            let (lo, hi) = self.b_range;
            let params: Vec<f32> = (0..self.b_scale.len()).map(|i| i as f32).collect();
            let axis = t.rank().saturating_sub(1);
            let centred = map_channels(t, axis, &params, |v, i| {
                let (s, z) = (self.b_scale[i as usize], self.b_zero[i as usize]);
                grid_code(v, s, z, lo, hi) - z
            })?;
            inputs[1] = Some(Value::Tensor(centred));
        }
        Ok(())
    }

    /// The exact accumulator becomes the runtime's saturated code, dequantized.
    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        let Some(Some(Value::Tensor(acc))) = outputs.first() else { return Ok(()) };
        let (lo, hi, sy) = (self.lo, self.hi, self.y_scale);
        let axis = acc.rank().saturating_sub(1);
        let y = map_channels(acc, axis, &self.multiplier, |v, m| (v * m).clamp(lo, hi).round_ties_even() * sy)?;
        outputs[0] = Some(Value::Tensor(y));
        Ok(())
    }
}

/// How one Sigmoid between 8-bit per-tensor grids is simulated: as ONNX Runtime's
/// QLinearSigmoid computes it, a 256-entry table built once from the dequantized input codes
/// with MLAS's logistic ([`crate::cpu::elementwise::logistic`]) and quantized with `rne(v/s_y) + z_y`.
#[derive(Clone, Debug)]
pub struct IntegerSigmoid {
    x: (f32, f32),
    x_range: (f32, f32),
    /// The dequantized output per input code `q_min ..= q_max`.
    table: Vec<f32>,
    /// The looked-up outputs of the running operation (set by `integer_inputs`).
    looked_up: Option<Vec<f32>>,
}

impl IntegerSigmoid {
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        if op_type != "Sigmoid" {
            return None;
        }
        let eight_bit = |c: &&TensorQuantConfig| holds(c) && per_tensor(c) && full_8bit(c);
        let x = config.input_configs.first()?.as_ref().filter(eight_bit)?;
        let y = config
            .output_configs
            .first()?
            .as_ref()
            .filter(|c| eight_bit(c) && c.rounding == RoundingPolicy::HalfEven)?;
        let (sx, zx, sy, zy) = (x.scale[0], x.offset[0], y.scale[0], y.offset[0]);
        let (y_lo, y_hi) = (y.quant_min as f32, y.quant_max as f32);
        let table = (x.quant_min..=x.quant_max)
            .map(|q| {
                let v = crate::cpu::elementwise::logistic(sx * (q as f32 - zx));
                (((v / sy).round_ties_even() + zy).clamp(y_lo, y_hi) - zy) * sy
            })
            .collect();
        Some(Self { x: (sx, zx), x_range: (x.quant_min as f32, x.quant_max as f32), table, looked_up: None })
    }

    /// Looks the outputs up from the input codes; the kernel still runs (for the output's shape
    /// and type), and `requantize` replaces its result.
    pub fn integer_inputs(&mut self, inputs: &[Option<Value>]) -> Result<()> {
        let Some(Some(Value::Tensor(t))) = inputs.first() else { return Ok(()) };
        if t.kind() != Kind::Float {
            return Ok(());
        }
        let ((s, z), (lo, hi)) = (self.x, self.x_range);
        let src = crate::cpu::f32_values_or_copy(t);
        let table = &self.table;
        let looked_up = crate::cpu::elementwise::map_runs(&src, usize::MAX, |v, _| {
            let index = (grid_code(v, s, z, lo, hi) - lo) as usize;
            table.get(index).copied().unwrap_or(f32::NAN)
        });
        self.looked_up = Some(looked_up);
        Ok(())
    }

    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        let (Some(Some(Value::Tensor(y))), Some(values)) = (outputs.first(), self.looked_up.as_ref()) else {
            return Ok(());
        };
        if y.numel() != values.len() {
            return Err(ExecError::Op {
                node: "integer simulation".into(),
                op_type: "Sigmoid".into(),
                message: format!("{} outputs for {} inputs", y.numel(), values.len()),
            });
        }
        outputs[0] = Some(Value::Tensor(y.like_f32(&y.shape(), values.clone())));
        Ok(())
    }
}

/// Whether ONNX Runtime's broadcast loop hands QLinearAdd input A as one value per span: A has
/// size 1 on the innermost output dimension larger than 1 and B does not (then B is streamed).
fn a_scalar_per_span(a: &[usize], b: &[usize], out: &[usize]) -> bool {
    let dim = |s: &[usize], i: usize| {
        let lead = out.len() - s.len();
        if i < lead { 1 } else { s[i - lead] }
    };
    match (0..out.len()).rev().find(|&i| out[i] > 1) {
        Some(i) => dim(a, i) == 1 && dim(b, i) > 1,
        None => false,
    }
}

/// The integer path of one operation, when it has one.
#[derive(Clone, Debug)]
pub enum IntegerPlan {
    Conv(IntegerConv),
    Add(IntegerAdd),
    Mul(IntegerMul),
    MatMul(IntegerMatMul),
    Sigmoid(IntegerSigmoid),
}

impl IntegerPlan {
    pub fn plan(op_type: &str, config: &OperationQuantConfig) -> Option<Self> {
        IntegerConv::plan(op_type, config)
            .map(Self::Conv)
            .or_else(|| IntegerAdd::plan(op_type, config).map(Self::Add))
            .or_else(|| IntegerMul::plan(op_type, config).map(Self::Mul))
            .or_else(|| IntegerMatMul::plan(op_type, config).map(Self::MatMul))
            .or_else(|| IntegerSigmoid::plan(op_type, config).map(Self::Sigmoid))
    }

    /// Whether each input's integer code depends on that input alone (so a constant input's code
    /// can be kept across runs); Add computes its result from both inputs at once, Sigmoid keeps
    /// its lookup.
    pub fn converts_inputs_independently(&self) -> bool {
        matches!(self, Self::Conv(_) | Self::Mul(_) | Self::MatMul(_))
    }

    /// What the kernel may be told of its integer inputs (convolutions: see [`IntegerConv`]).
    pub fn integer_codes(&self) -> Option<IntegerCodes> {
        match self {
            Self::Conv(p) => p.integer_codes(),
            _ => None,
        }
    }

    pub fn integer_inputs(&mut self, inputs: &mut [Option<Value>]) -> Result<()> {
        match self {
            Self::Conv(p) => p.integer_inputs(inputs),
            Self::Add(p) => p.integer_inputs(inputs),
            Self::Mul(p) => p.integer_inputs(inputs),
            Self::MatMul(p) => p.integer_inputs(inputs),
            Self::Sigmoid(p) => p.integer_inputs(inputs),
        }
    }

    pub fn requantize(&self, outputs: &mut [Option<Value>]) -> Result<()> {
        match self {
            Self::Conv(p) => p.requantize(outputs),
            Self::Add(p) => p.requantize(outputs),
            Self::Mul(p) => p.requantize(outputs),
            Self::MatMul(p) => p.requantize(outputs),
            Self::Sigmoid(p) => p.requantize(outputs),
        }
    }
}

/// The code the runtime's QuantizeLinear gives `v` on the grid (scale `s`, zero point `z`,
/// codes `lo..=hi`): rounded half to even, saturated.
fn grid_code(v: f32, s: f32, z: f32, lo: f32, hi: f32) -> f32 {
    ((v / s).round_ties_even() + z).clamp(lo, hi)
}

/// Applies `f` to every value.
fn map_values(t: &Tensor, f: impl Fn(f32) -> f32 + Sync) -> Result<Tensor> {
    map_channels(t, 0, &[0.0], |v, _| f(v))
}

/// Applies `f(value, param[c])` with `c` the index along `axis` (one param = the same for all).
fn map_channels(t: &Tensor, axis: usize, params: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Tensor> {
    let fail = |message: String| ExecError::Op { node: "integer simulation".into(), op_type: "Conv".into(), message };
    if t.kind() != Kind::Float {
        return Err(fail(format!("expected a float tensor, got {}", t.dtype())));
    }
    let shape = t.shape();
    let channels = shape.get(axis).copied().unwrap_or(1);
    if params.len() != 1 && params.len() != channels {
        return Err(fail(format!(
            "{} per-channel parameters for {channels} channels on axis {axis} of {shape:?}",
            params.len()
        )));
    }
    let inner: usize = shape.iter().skip(axis + 1).product();
    let src = crate::cpu::f32_values_or_copy(t);
    let values = if params.len() == 1 || inner == 0 {
        let p = params[0];
        crate::cpu::elementwise::map_runs(&src, usize::MAX, |v, _| f(v, p))
    } else {
        crate::cpu::elementwise::map_runs(&src, inner, |v, run| f(v, params[run % channels]))
    };
    Ok(t.like_f32(&shape, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    fn config(bits_range: (i64, i64), scale: Vec<f32>, offset: Vec<f32>, axis: Option<usize>) -> TensorQuantConfig {
        let symmetric = bits_range.0 < 0;
        let mut c = TensorQuantConfig::linear(if bits_range.1 > 255 { 32 } else { 8 }, symmetric, axis).unwrap();
        (c.quant_min, c.quant_max) = bits_range;
        c.scale = scale;
        c.offset = offset;
        c.state = QuantizationState::Activated;
        c
    }

    fn conv_configs() -> OperationQuantConfig {
        let x = config((0, 255), vec![0.1], vec![3.0], None);
        let w = config((-64, 63), vec![0.02, 0.05], vec![0.0, 0.0], Some(0));
        let b = config((-(1 << 31), (1 << 31) - 1), vec![0.1 * 0.02, 0.1 * 0.05], vec![0.0, 0.0], Some(0));
        let y = config((0, 255), vec![0.3], vec![10.0], None);
        OperationQuantConfig { input_configs: vec![Some(x), Some(w), Some(b)], output_configs: vec![Some(y)] }
    }

    #[test]
    fn only_fully_quantized_8bit_convolutions_take_the_integer_path() {
        let cfg = conv_configs();
        assert!(IntegerConv::plan("Conv", &cfg).is_some());
        assert!(IntegerConv::plan("Gemm", &cfg).is_none());
        let mut narrow = cfg.clone();
        narrow.output_configs[0].as_mut().unwrap().quant_max = 15;
        assert!(
            IntegerConv::plan("Conv", &narrow).is_none(),
            "4-bit outputs are exported with a Clip: float in the runtime"
        );
        let mut float_bias = cfg.clone();
        float_bias.input_configs[2].as_mut().unwrap().state = QuantizationState::Fp32;
        assert!(IntegerConv::plan("Conv", &float_bias).is_none());
        let mut no_bias = cfg.clone();
        no_bias.input_configs.truncate(2);
        assert!(IntegerConv::plan("Conv", &no_bias).is_some());
        let mut fused = cfg;
        fused.output_configs[0].as_mut().unwrap().state = QuantizationState::Overlapped;
        assert!(IntegerConv::plan("Conv", &fused).is_some(), "an overlapped output carries its dominator's parameters");
    }

    /// The two code pairs (of 65 536) where ONNX Runtime's QLinearAdd and dequantize-add-
    /// quantize disagree for these parameters (a residual Add of CenterFace): the plan gives
    /// the runtime's codes, checked against ORT 1.31 on that model.
    #[test]
    fn additions_round_like_qlinearadd() {
        let device = Device::cpu();
        let (sa, za, sb, zb, sy, zy) = (0.030_056_28f32, 128.0, 0.018_344_726f32, 132.0, 0.033_976_648f32, 129.0);
        let cfg = OperationQuantConfig {
            input_configs: vec![
                Some(config((0, 255), vec![sa], vec![za], None)),
                Some(config((0, 255), vec![sb], vec![zb], None)),
            ],
            output_configs: vec![Some(config((0, 255), vec![sy], vec![zy], None))],
        };
        let plan = IntegerAdd::plan("Add", &cfg).unwrap();
        let (qa, qb, runtime) = ([115f32, 216.0], [132f32, 211.0], [118f32, 250.0]);
        let tensor = |q: &[f32], s: f32, z: f32| {
            Some(Value::Tensor(Tensor::from_f32(&[2], q.iter().map(|q| (q - z) * s).collect(), &device)))
        };
        let mut inputs = vec![tensor(&qa, sa, za), tensor(&qb, sb, zb)];
        plan.integer_inputs(&mut inputs).unwrap();
        let [a, b] = [0, 1].map(|i| inputs[i].as_ref().unwrap().as_tensor().unwrap().to_f32_vec());
        let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let mut outputs = vec![Some(Value::Tensor(Tensor::from_f32(&[2], sum, &device)))];
        plan.requantize(&mut outputs).unwrap();
        let got = outputs[0].as_ref().unwrap().as_tensor().unwrap().to_f32_vec();
        let expected: Vec<f32> = runtime.iter().map(|q| (q - zy) * sy).collect();
        assert_eq!(got, expected);
        // Dequantize, add, quantize: one step lower on both.
        let plain: Vec<f32> =
            qa.iter().zip(&qb).map(|(a, b)| (((a - za) * sa + (b - zb) * sb) / sy).round_ties_even() + zy).collect();
        assert_eq!(plain, [117.0, 249.0]);
        assert!(IntegerPlan::plan("Add", &cfg).is_some() && IntegerAdd::plan("Mul", &cfg).is_none());
    }

    #[test]
    fn inputs_become_integer_codes_and_outputs_requantize_like_the_runtime() {
        let device = Device::cpu();
        let plan = IntegerConv::plan("Conv", &conv_configs()).unwrap();
        // x = (q − 3)·0.1 for q = 0, 7, 255; w = code·s_w[c]; b = code·s_b[c].
        let x: Vec<f32> = [0f32, 7.0, 255.0].iter().map(|q| (q - 3.0) * 0.1).collect();
        let w = vec![-64.0 * 0.02, 63.0 * 0.05];
        let b = vec![5.0 * (0.1 * 0.02), -9.0 * (0.1 * 0.05)];
        let mut inputs = vec![
            Some(Value::Tensor(Tensor::from_f32(&[1, 1, 3, 1], x, &device))),
            Some(Value::Tensor(Tensor::from_f32(&[2, 1, 1, 1], w, &device))),
            Some(Value::Tensor(Tensor::from_f32(&[2], b, &device))),
        ];
        plan.integer_inputs(&mut inputs).unwrap();
        let codes: Vec<Vec<f32>> =
            inputs.iter().map(|v| v.as_ref().unwrap().as_tensor().unwrap().to_f32_vec()).collect();
        assert_eq!(codes, vec![vec![-3.0, 4.0, 252.0], vec![-64.0, 63.0], vec![5.0, -9.0]]);

        // Accumulators per output channel; m[c] = s_x·s_w[c]/s_y in float32.
        let acc = vec![100.0f32, -7.0, 1e6, -1e6];
        let mut outputs = vec![Some(Value::Tensor(Tensor::from_f32(&[1, 2, 2, 1], acc.clone(), &device)))];
        plan.requantize(&mut outputs).unwrap();
        let got = outputs[0].as_ref().unwrap().as_tensor().unwrap().to_f32_vec();
        let m = [0.1f32 * 0.02 / 0.3, 0.1f32 * 0.05 / 0.3];
        let expected: Vec<f32> =
            acc.iter().enumerate().map(|(i, a)| (a * m[i / 2]).clamp(-10.0, 245.0).round_ties_even() * 0.3).collect();
        assert_eq!(got, expected);
        assert_eq!(got[2], 245.0 * 0.3, "saturates at q_max − z_y");
        assert_eq!(got[3], -10.0 * 0.3, "saturates at q_min − z_y");
    }
}
