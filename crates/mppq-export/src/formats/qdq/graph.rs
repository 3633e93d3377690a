//! QDQ ONNX export: turns an IR model whose operations carry calibrated quantization configs
//! into a float ONNX model with QuantizeLinear/DequantizeLinear (the format ONNX Runtime fuses
//! into integer kernels), so that ORT computes what our fake-quant simulation computes.
//!
//! Placement (see `docs/export.md`):
//! - an active output config puts one Q→DQ pair right after its producer, read by every
//!   consumer (and the graph output, which keeps its name);
//! - an active input config identical to what already covers its tensor adds nothing; a
//!   different one gets its own pair on that edge only (pairs are shared by consumers with
//!   equal configs, e.g. at a graph input);
//! - a parameter (initializer) becomes an integer initializer + DequantizeLinear (or Q/DQ on
//!   the float value, [`QdqOptions::weights_as_integers`]); 32-bit bias configs give an int32
//!   initializer with zero point 0 and `axis` 0;
//! - `Overlapped`, `Fp32` and `Soi` configs export nothing.

use super::blocked::{BlockedWeights, blocked_codes, blocked_params_shape, to_matmul_nbits};
use crate::error::{ExportError, Result};
use mppq_ir::quant::{QuantizationState, RoundingPolicy, TensorQuantConfig};
use mppq_ir::{Attribute, DataType, Graph, Model, OpId, Operation, TensorData, VarId, Variable};
use std::collections::HashSet;

/// Options of [`export_qdq`]; each one changes the written model (see the tests). Part of the
/// quantization setting file, so unknown keys are refused.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QdqOptions {
    /// Parameters as integer initializers + DequantizeLinear (`true`, the compact form ORT
    /// loads fastest) or QuantizeLinear→DequantizeLinear on the original float value (`false`).
    /// FP8 parameters always use the second form.
    pub weights_as_integers: bool,
    /// Biases with a 32-bit config as int32 + DequantizeLinear (`true`). With `false` the bias
    /// stays a float initializer holding the fake-quantized values (same numbers, but ORT
    /// then does not fuse the operation into an integer kernel).
    pub quantize_bias: bool,
    /// Lowest default-domain opset to write; raised further when a feature needs it (10 for
    /// Q/DQ, 11 for the Clip of a narrowed range, 13 for per-channel, 19 for FP8, 21 for 4- and
    /// 16-bit types). Never lowered.
    pub min_opset: i64,
    /// Export FP8 (E4M3FN / E5M2) configs as FLOAT8 Q/DQ at opset 19. Off by default: ONNX
    /// Runtime 1.31's CPU EP runs FLOAT8 Q/DQ, but with its default optimisations its QDQ
    /// fusions hand FLOAT8 tensors to MaxPool / QLinearSigmoid and the session fails to load
    /// ("Type 'tensor(float8e4m3fn)' … is invalid"); such exports need `ORT_ENABLE_BASIC`.
    pub allow_fp8: bool,
    /// How block-wise (weight-only) weights are written: `matmul_nbits` (ONNX Runtime's
    /// `com.microsoft::MatMulNBits`, no opset change) or `dequantize_linear` (opset 21's blocked
    /// `DequantizeLinear`, standard ONNX). See `blocked.rs`.
    pub blocked_weights: BlockedWeights,
    /// `MatMulNBits`' `accuracy_level` (0: not written, ONNX Runtime's float32 computation,
    /// which the simulation models; 4 makes ORT's CPU kernel quantize the activations to int8,
    /// which it does not).
    pub accuracy_level: i64,
}

impl Default for QdqOptions {
    fn default() -> Self {
        Self {
            weights_as_integers: true,
            quantize_bias: true,
            min_opset: 10,
            allow_fp8: false,
            blocked_weights: BlockedWeights::default(),
            accuracy_level: 0,
        }
    }
}

impl QdqOptions {
    /// `min_opset` must be an opset this build writes (opset 99 used to be written as 99).
    fn check(&self) -> Result<()> {
        if !matches!(self.accuracy_level, 0..=4) {
            return Err(ExportError::BadOption {
                option: "accuracy_level".into(),
                message: format!("{} is not a MatMulNBits accuracy level; use 0 (unset) to 4", self.accuracy_level),
            });
        }
        if (QDQ_MIN_OPSET..=mppq_onnx::MAX_OPSET).contains(&self.min_opset) {
            return Ok(());
        }
        Err(ExportError::BadOption {
            option: "min_opset".into(),
            message: format!(
                "{} is not an opset Q/DQ can be written at; use {QDQ_MIN_OPSET} (QuantizeLinear's first) to {} (the newest this build knows)",
                self.min_opset,
                mppq_onnx::MAX_OPSET
            ),
        })
    }
}

/// QuantizeLinear and DequantizeLinear exist from opset 10.
const QDQ_MIN_OPSET: i64 = 10;

/// How one config is written: the Q/DQ element type, whether a Clip must keep a range narrower
/// than the type's, and the opset / IR version the type needs.
#[derive(Clone, Copy, Debug, PartialEq)]
struct QFormat {
    dtype: DataType,
    clip: bool,
    /// What needs `opset` (for messages): "per-channel Q/DQ", "Int4 Q/DQ", ….
    feature: &'static str,
    opset: i64,
    ir: i64,
}

/// `param`: the config quantizes an initializer (4-bit parameters are stored as INT4/UINT4;
/// 4-bit activations use 8-bit Q/DQ with a Clip, because ORT 1.31 moves MaxPool between a
/// UINT4 Q and DQ and then refuses the graph: "Type 'tensor(uint4)' … of operator (MaxPool) is
/// invalid").
fn format_of(c: &TensorQuantConfig, param: bool) -> std::result::Result<QFormat, String> {
    if c.policy.is_floating() {
        let (dtype, max) = match (c.exponent_bits, c.mantissa_bits) {
            (4, 3) => (DataType::Float8E4M3FN, 448),
            (5, 2) => (DataType::Float8E5M2, 57344),
            (e, m) => return Err(format!("floating format E{e}M{m} has no ONNX type (use E4M3 or E5M2)")),
        };
        if (c.quant_min, c.quant_max) != (-max, max) {
            return Err(format!(
                "FP8 range [{}, {}] is narrower than the type's ±{max}; QuantizeLinear cannot keep it",
                c.quant_min, c.quant_max
            ));
        }
        return Ok(QFormat { dtype, clip: false, feature: "FLOAT8 Q/DQ", opset: 19, ir: 9 });
    }
    if c.policy.is_power_of_2() && c.scale.iter().any(|s| s.log2().fract() != 0.0) {
        return Err("power-of-2 policy with a scale that is not a power of two".into());
    }
    let signed = c.quant_min < 0;
    if c.block.is_some() {
        if c.offset.iter().any(|o| o.fract() != 0.0) {
            return Err("float zero points (HQQ) have no DequantizeLinear form; write them as MatMulNBits (blocked_weights = \"matmul_nbits\")".into());
        }
        let dtype = match (c.num_of_bits, signed, param) {
            (4, true, true) => DataType::Int4,
            (4, false, true) => DataType::Uint4,
            (8, true, true) => DataType::Int8,
            (8, false, true) => DataType::Uint8,
            (b, _, true) => {
                return Err(format!(
                    "{b}-bit block-wise weights have no blocked DequantizeLinear type; write them as MatMulNBits (blocked_weights = \"matmul_nbits\")"
                ));
            }
            _ => return Err("block-wise configs are for weights (initializers) only".into()),
        };
        return Ok(QFormat { dtype, clip: false, feature: "blocked DequantizeLinear", opset: 21, ir: 10 });
    }
    let (dtype, opset, ir) = match (c.num_of_bits, signed) {
        // Biases: 32 bits, or fewer than 32 held in int32 (the academic platform's 30).
        (17..=32, _) => (DataType::Int32, 10, 7),
        (4, true) if param => (DataType::Int4, 21, 10),
        (4, false) if param => (DataType::Uint4, 21, 10),
        (2..=8, true) => (DataType::Int8, 10, 7),
        (2..=8, false) => (DataType::Uint8, 10, 7),
        (9..=16, true) => (DataType::Int16, 21, 10),
        (9..=16, false) => (DataType::Uint16, 21, 10),
        (b, _) => return Err(format!("{b} bits cannot be exported")),
    };
    let (lo, hi) = type_range(dtype);
    if c.quant_min < lo || c.quant_max > hi {
        return Err(format!("range [{}, {}] does not fit {dtype:?}", c.quant_min, c.quant_max));
    }
    let clip = (c.quant_min, c.quant_max) != (lo, hi);
    // Q/DQ exist from opset 10, per tensor; their `axis` (per channel) from 13; a Clip with
    // bounds as inputs from 11.
    let (opset, feature) = match (c.channel_axis.is_some(), clip) {
        _ if opset > 13 => {
            (opset, if matches!(dtype, DataType::Int4 | DataType::Uint4) { "4-bit Q/DQ" } else { "16-bit Q/DQ" })
        }
        (true, _) => (13, "per-channel Q/DQ"),
        (false, true) => (11, "the Clip of a narrowed range"),
        (false, false) => (opset, "Q/DQ"),
    };
    Ok(QFormat { dtype, clip, feature, opset, ir })
}

fn type_range(dtype: DataType) -> (i64, i64) {
    match dtype {
        DataType::Int4 => (-8, 7),
        DataType::Uint4 => (0, 15),
        DataType::Int8 => (-128, 127),
        DataType::Uint8 => (0, 255),
        DataType::Int16 => (-32768, 32767),
        DataType::Uint16 => (0, 65535),
        _ => (i64::from(i32::MIN), i64::from(i32::MAX)),
    }
}

/// One config to export.
struct Site {
    op: OpId,
    slot: usize,
    var: VarId,
    config: TensorQuantConfig,
    format: QFormat,
}

/// Whether a config is exported; configs in a state that needs calibration are an error.
fn exported(c: &TensorQuantConfig, g: &Graph, op: OpId, var: VarId) -> Result<bool> {
    let missing = |c: &TensorQuantConfig| -> Result<bool> {
        let o = g.operation(op)?;
        Err(ExportError::NotCalibrated {
            op: o.name.clone(),
            op_type: o.op_type.clone(),
            tensor: g.var_name(var).to_string(),
            state: format!("{:?}", c.state),
        })
    };
    match c.state {
        QuantizationState::Activated
        | QuantizationState::Passive
        | QuantizationState::Baked
        | QuantizationState::PassiveBaked => {
            if c.scale.is_empty() {
                missing(c)
            } else {
                Ok(true)
            }
        }
        QuantizationState::Initial | QuantizationState::PassiveInit => missing(c),
        QuantizationState::Overlapped | QuantizationState::Fp32 | QuantizationState::Soi => Ok(false),
    }
}

pub(super) fn unsupported(g: &Graph, op: OpId, var: VarId, message: String) -> ExportError {
    let (name, ty) = g.operation(op).map(|o| (o.name.clone(), o.op_type.clone())).unwrap_or_default();
    ExportError::Unsupported { op: name, op_type: ty, tensor: g.var_name(var).to_string(), message }
}

/// The exported configs: (outputs, activation inputs, parameter inputs), in graph order.
type Plan = (Vec<Site>, Vec<Site>, Vec<Site>);

fn plan(g: &Graph, options: &QdqOptions) -> Result<Plan> {
    let (mut outs, mut acts, mut params) = (Vec::new(), Vec::new(), Vec::new());
    for (id, op) in g.operations() {
        let Some(qc) = op.quant_config.as_ref() else { continue };
        let sides = [(false, &qc.input_configs, op.inputs()), (true, &qc.output_configs, op.outputs())];
        for (is_output, configs, vars) in sides {
            for (slot, (config, var)) in configs.iter().zip(vars).enumerate() {
                let (Some(config), Some(var)) = (config, var) else { continue };
                if !exported(config, g, id, *var)? {
                    continue;
                }
                config.validate().map_err(|e| unsupported(g, id, *var, e.to_string()))?;
                let is_param = g.variable(*var)?.value.is_some();
                let format = format_of(config, is_param).map_err(|m| unsupported(g, id, *var, m))?;
                if config.policy.is_floating() && !options.allow_fp8 {
                    return Err(unsupported(g, id, *var, "FP8 Q/DQ: ONNX Runtime 1.31 (CPU, default optimisations) cannot load FP8 QDQ graphs (its QDQ fusions give FLOAT8 to MaxPool / QLinearSigmoid); set QdqOptions::allow_fp8 to export for ORT_ENABLE_BASIC or another runtime".into()));
                }
                let site = Site { op: id, slot, var: *var, config: config.clone(), format };
                if !is_param && config.rounding != RoundingPolicy::HalfEven {
                    return Err(unsupported(
                        g,
                        id,
                        *var,
                        format!(
                            "rounding {:?}: QuantizeLinear rounds half to even; use half_even for activations",
                            config.rounding
                        ),
                    ));
                }
                if !is_param && site.format.clip && config.channel_axis.is_some() {
                    return Err(unsupported(g, id, *var, "a per-channel activation range narrower than its Q/DQ type cannot be kept (one Clip bound per tensor)".into()));
                }
                match (is_output, is_param) {
                    (true, _) => outs.push(site),
                    (false, false) => acts.push(site),
                    (false, true) => params.push(site),
                }
            }
        }
    }
    Ok((outs, acts, params))
}

/// `(channels, inner)`: how a row-major tensor of `shape` splits around `c`'s channel axis.
fn channel_split(shape: &[usize], len: usize, c: &TensorQuantConfig) -> std::result::Result<(usize, usize), String> {
    let (channels, inner) = match c.channel_axis {
        None => (1, len.max(1)),
        Some(axis) => {
            let ch = *shape.get(axis).ok_or_else(|| format!("channel axis {axis} out of range for shape {shape:?}"))?;
            (ch, shape[axis + 1..].iter().product::<usize>().max(1))
        }
    };
    if c.scale.len() != channels || c.offset.len() != channels {
        return Err(format!("{} scales for {channels} channels (shape {shape:?})", c.scale.len()));
    }
    Ok((channels, inner))
}

/// Integers of `data` under `c` with the simulation's arithmetic: `v = x / s` in f32, the
/// config's rounding, `+ offset`, clamp to `[quant_min, quant_max]`, then the config's pair
/// limit (weights for x86 CPUs without VNNI) as the simulation applies it.
fn quantize_values(data: &[f32], shape: &[usize], c: &TensorQuantConfig) -> std::result::Result<Vec<i64>, String> {
    let (channels, inner) = channel_split(shape, data.len(), c)?;
    let mut ints: Vec<i64> = data
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let ch = (i / inner) % channels;
            let v = f64::from(*x / c.scale[ch]);
            let q = c.rounding.round(v) + f64::from(c.offset[ch]);
            q.clamp(c.quant_min as f64, c.quant_max as f64) as i64
        })
        .collect();
    if let Some(limit) = c.pair_limit.as_ref().filter(|_| c.offset.iter().all(|o| *o == 0.0)) {
        limit.apply(&mut ints, shape);
    }
    Ok(ints)
}

/// `(q − offset) · scale` in f32, as the simulation dequantizes (only after [`quantize_values`]
/// accepted the same shape and config).
fn dequantize_values(ints: &[i64], shape: &[usize], c: &TensorQuantConfig) -> Vec<f32> {
    let (channels, inner) = channel_split(shape, ints.len(), c).unwrap_or((1, ints.len().max(1)));
    ints.iter()
        .enumerate()
        .map(|(i, q)| {
            let ch = (i / inner) % channels;
            let (s, o) = (c.scale.get(ch).copied().unwrap_or(1.0), c.offset.get(ch).copied().unwrap_or(0.0));
            (*q as f32 - o) * s
        })
        .collect()
}

/// Integer values as a tensor of `dtype` (4-bit types packed two per byte, low nibble first).
fn int_tensor(dtype: DataType, shape: Vec<usize>, values: &[i64]) -> Result<TensorData> {
    let mut bytes = Vec::with_capacity(values.len() * 4);
    match dtype {
        DataType::Int4 | DataType::Uint4 => bytes = mppq_ir::lowp::pack_sub_byte(4, values),
        DataType::Int8 | DataType::Uint8 => bytes.extend(values.iter().map(|v| *v as u8)),
        DataType::Int16 | DataType::Uint16 => values.iter().for_each(|v| bytes.extend((*v as u16).to_le_bytes())),
        DataType::Int32 => values.iter().for_each(|v| bytes.extend((*v as i32).to_le_bytes())),
        // FP8 zero points: +0.0 is the all-zero byte in both formats.
        DataType::Float8E4M3FN | DataType::Float8E5M2 => bytes.extend(values.iter().map(|_| 0u8)),
        other => {
            return Err(ExportError::Ir(mppq_ir::IrError::InvalidQuantConfig(format!(
                "no integer encoding for {other:?}"
            ))));
        }
    }
    Ok(TensorData::from_packed(dtype, shape, bytes)?)
}

/// Scale and zero-point initializers of a config: scalars per tensor, vectors per channel.
fn qparams(g: &mut Graph, base: &str, c: &TensorQuantConfig, dtype: DataType) -> Result<(VarId, VarId)> {
    let shape = if c.channel_axis.is_some() { vec![c.scale.len()] } else { vec![] };
    let scale = TensorData::from_vec(shape.clone(), &c.scale)?;
    let zp: Vec<i64> = c.offset.iter().map(|o| *o as i64).collect();
    let zp = int_tensor(dtype, shape, &zp)?;
    let s = g.add_initializer(g.fresh_var_name(&format!("{base}_scale")), scale)?;
    let z = g.add_initializer(g.fresh_var_name(&format!("{base}_zero_point")), zp)?;
    Ok((s, z))
}

fn qdq_op(g: &Graph, op_type: &str, base: &str, c: &TensorQuantConfig, opset: i64) -> Operation {
    let mut op = Operation::new(op_type, g.fresh_op_name(&format!("{base}_{op_type}"))).with_opset(opset);
    if let Some(axis) = c.channel_axis {
        op = op.with_attr("axis", Attribute::Int(axis as i64));
    }
    op
}

/// Adds `[Clip →] QuantizeLinear → DequantizeLinear` reading `src` and writing `dst` (a fresh
/// variable without producer). Consumers are not touched.
fn add_pair(g: &mut Graph, src: VarId, dst: VarId, c: &TensorQuantConfig, f: QFormat, opset: i64) -> Result<()> {
    let base = g.var_name(src).to_string();
    let (s, z) = qparams(g, &base, c, f.dtype)?;
    let mut x = src;
    if f.clip {
        // QuantizeLinear saturates to the type's range; the config's narrower range is applied
        // first in float (bounds are exact grid points, so rounding cannot cross them).
        let (o, sc) = (c.offset[0], c.scale[0]);
        let lo = g.add_initializer(
            g.fresh_var_name(&format!("{base}_clip_min")),
            TensorData::scalar((c.quant_min as f32 - o) * sc),
        )?;
        let hi = g.add_initializer(
            g.fresh_var_name(&format!("{base}_clip_max")),
            TensorData::scalar((c.quant_max as f32 - o) * sc),
        )?;
        let clipped = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_clipped"))))?;
        let clip = Operation::new("Clip", g.fresh_op_name(&format!("{base}_Clip"))).with_opset(opset);
        g.add_operation(clip, &[Some(x), Some(lo), Some(hi)], &[Some(clipped)])?;
        x = clipped;
    }
    let q = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_quantized"))))?;
    let qop = qdq_op(g, "QuantizeLinear", &base, c, opset);
    g.add_operation(qop, &[Some(x), Some(s), Some(z)], &[Some(q)])?;
    let dq = qdq_op(g, "DequantizeLinear", &base, c, opset);
    g.add_operation(dq, &[Some(q), Some(s), Some(z)], &[Some(dst)])?;
    Ok(())
}

/// Refuses raising `graph` from opset `from` to `to` when an operation cannot be converted
/// (the blockers of [`mppq_ir::morph::upgrade_opset`]).
fn check_raise(graph: &Graph, from: i64, to: i64, why: &str) -> Result<()> {
    let blockers = mppq_ir::morph::blockers(graph, from, to);
    if blockers.is_empty() {
        return Ok(());
    }
    Err(ExportError::Opset { from, to, why: why.into(), blockers })
}

/// Converts the model to opset `to` (the operations whose meaning changed are rewritten).
fn raise_opset(model: &mut Model, to: i64, why: &str) -> Result<()> {
    let from = model.opset("").unwrap_or(1);
    if to <= from {
        return Ok(());
    }
    check_raise(&model.graph, from, to, why)?;
    mppq_onnx::upgrade_model(model, to)?;
    Ok(())
}

/// What can be checked before calibration: the opset the export will need (from `min_opset` and
/// the formats of the configs already on the operations) can be reached from the model's opset
/// (`from`): every operation whose meaning changed on the way can be converted. Calibration of a
/// large model takes minutes; this refusal then comes first.
pub fn preflight_qdq(graph: &Graph, from: i64, options: &QdqOptions) -> Result<()> {
    options.check()?;
    let mut to = options.min_opset.max(from);
    let mut why = "Q/DQ";
    for (_, op) in graph.operations() {
        let Some(qc) = op.quant_config.as_ref() else { continue };
        for (slot, c) in qc.input_configs.iter().chain(&qc.output_configs).enumerate() {
            // Block-wise weights whose zero points will be refined floats (HQQ) have no
            // DequantizeLinear form: refused before calibration.
            if let Some(c) = c.as_ref().filter(|c| c.block.is_some() && !c.policy.is_symmetric())
                && c.observer == mppq_ir::quant::ObserverKind::Hqq
                && options.blocked_weights == BlockedWeights::DequantizeLinear
            {
                return Err(ExportError::BadOption {
                    option: "blocked_weights".into(),
                    message: format!(
                        "operation `{}`: HQQ's float zero points have no DequantizeLinear form; write MatMulNBits (blocked_weights = \"matmul_nbits\") or calibrate with --observer minmax",
                        op.name
                    ),
                });
            }
            let Some(c) = c.as_ref().filter(|c| c.state.is_active()) else { continue };
            // Written as MatMulNBits, which needs no opset (the rare operation it cannot express
            // is checked when exported).
            if c.block.is_some() && options.blocked_weights == BlockedWeights::MatmulNbits {
                continue;
            }
            let is_param = op
                .inputs()
                .get(slot)
                .copied()
                .flatten()
                .is_some_and(|v| graph.variable(v).is_ok_and(|v| v.value.is_some()));
            if let Ok(f) = format_of(c, is_param)
                && f.opset > to
            {
                to = f.opset;
                why = f.feature;
            }
        }
    }
    if to <= from { Ok(()) } else { check_raise(graph, from, to, why) }
}

/// Exports `model` (operations carrying calibrated configs) as a float ONNX model with
/// QuantizeLinear/DequantizeLinear. The input model is not modified.
pub fn export_qdq(model: &Model, options: &QdqOptions) -> Result<Model> {
    options.check()?;
    let mut out = model.clone();
    if options.blocked_weights == BlockedWeights::MatmulNbits
        && matmul_nbits_everywhere(&mut out.graph, options.accuracy_level)? > 0
    {
        out.opset_imports.entry("com.microsoft".into()).or_insert(1);
    }
    let mut formats = Vec::new();
    collect_formats(&out.graph, options, &mut formats)?;
    let mut opset = options.min_opset.max(model.opset("").unwrap_or(1));
    let mut why = "Q/DQ";
    let mut ir = 7;
    for f in formats {
        if f.opset > opset {
            why = f.feature;
        }
        opset = opset.max(f.opset);
        ir = ir.max(f.ir);
    }
    raise_opset(&mut out, opset, why)?;
    out.ir_version = out.ir_version.max(ir).min(mppq_onnx::MAX_IR_VERSION);
    export_graph(&mut out.graph, options, opset, &HashSet::new())?;
    Ok(out)
}

/// [`to_matmul_nbits`] on `g` and its sub-graphs; how many operations it replaced.
fn matmul_nbits_everywhere(g: &mut Graph, accuracy_level: i64) -> Result<usize> {
    let mut done = to_matmul_nbits(g, Some(accuracy_level))?;
    for_each_body(g, |body| {
        done += matmul_nbits_everywhere(body, accuracy_level)?;
        Ok(())
    })?;
    Ok(done)
}

/// Calls `f` on every sub-graph of `g`'s operations (If branches, Loop/Scan bodies).
fn for_each_body(g: &mut Graph, mut f: impl FnMut(&mut Graph) -> Result<()>) -> Result<()> {
    let with_bodies: Vec<OpId> = g
        .operations()
        .filter(|(_, op)| op.attributes.values().any(|a| matches!(a, Attribute::Graph(_))))
        .map(|(id, _)| id)
        .collect();
    for id in with_bodies {
        for a in g.operation_mut(id)?.attributes.values_mut() {
            if let Attribute::Graph(body) = a {
                f(body)?;
            }
        }
    }
    Ok(())
}

/// The Q/DQ formats of every exported config, in sub-graphs too.
fn collect_formats(g: &Graph, options: &QdqOptions, formats: &mut Vec<QFormat>) -> Result<()> {
    let (outs, acts, params) = plan(g, options)?;
    formats.extend(outs.iter().chain(&acts).chain(&params).map(|s| s.format));
    for (_, op) in g.operations() {
        for a in op.attributes.values() {
            if let Attribute::Graph(body) = a {
                collect_formats(body, options, formats)?;
            }
        }
    }
    Ok(())
}

/// Inserts the Q/DQ pairs of `g`'s configs, then of its sub-graphs' (If branches, loop bodies).
/// `outer`: the names of enclosing scopes, which a sub-graph's new names must not shadow.
fn export_graph(g: &mut Graph, options: &QdqOptions, opset: i64, outer: &HashSet<String>) -> Result<()> {
    let before: HashSet<String> = g.variables().map(|(_, v)| v.name.clone()).collect();
    insert_pairs(g, options, opset)?;
    // A name added here must not shadow an enclosing scope's (ONNX forbids it).
    let clashes: Vec<VarId> =
        g.variables().filter(|(_, v)| !before.contains(&v.name) && outer.contains(&v.name)).map(|(id, _)| id).collect();
    for id in clashes {
        let fresh = mppq_ir::edit::unused_name(g.var_name(id), |n| outer.contains(n) || g.var_id(n).is_some());
        g.rename_variable(id, &fresh)?;
    }
    let mut scope = outer.clone();
    scope.extend(g.variables().map(|(_, v)| v.name.clone()));
    for_each_body(g, |body| export_graph(body, options, opset, &scope))?;
    Ok(())
}

/// The Q/DQ pairs of one graph's own configs.
fn insert_pairs(g: &mut Graph, options: &QdqOptions, opset: i64) -> Result<()> {
    let (outs, acts, params) = plan(g, options)?;

    // Outputs: one pair after the producer, read by everyone (graph outputs keep their name).
    // `covered`: (tensor a consumer reads, config, what it should read instead).
    let mut covered: Vec<(VarId, TensorQuantConfig, VarId)> = Vec::new();
    // Sub-graphs read enclosing values by name: those names must then hold the quantized value.
    let captured = g.names_read_by_subgraphs();
    for s in &outs {
        let base = g.var_name(s.var).to_string();
        let dst = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_dequantized"))))?;
        g.replace_variable(s.var, dst)?;
        add_pair(g, s.var, dst, &s.config, s.format, opset)?;
        if g.is_graph_output(dst) || captured.contains(&base) {
            let tmp = g.fresh_var_name(&format!("{base}_float"));
            g.rename_variable(s.var, &tmp)?;
            g.rename_variable(dst, &base)?;
            let ty = g.variable_mut(s.var)?.ty.take();
            g.variable_mut(dst)?.ty = ty;
        }
        covered.push((dst, s.config.clone(), dst));
    }

    // Activation inputs: nothing where the tensor is already quantized the same way, else a
    // pair on this edge, shared with other edges from the same tensor with the same config.
    for s in &acts {
        let cur = g.operation(s.op)?.inputs()[s.slot]
            .ok_or_else(|| unsupported(g, s.op, s.var, "input slot emptied".into()))?;
        if let Some((_, _, dq)) = covered.iter().find(|(v, c, _)| *v == cur && c.same_grid(&s.config)) {
            let dq = *dq;
            if dq != cur {
                g.set_op_input(s.op, s.slot, Some(dq))?;
            }
            continue;
        }
        let base = g.var_name(cur).to_string();
        let dst = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_dequantized"))))?;
        add_pair(g, cur, dst, &s.config, s.format, opset)?;
        g.set_op_input(s.op, s.slot, Some(dst))?;
        covered.push((cur, s.config.clone(), dst));
    }

    // Parameters.
    let mut done: Vec<(VarId, TensorQuantConfig, VarId)> = Vec::new();
    for s in &params {
        if let Some((_, _, dq)) = done.iter().find(|(v, c, _)| *v == s.var && c.same_grid(&s.config)) {
            g.set_op_input(s.op, s.slot, Some(*dq))?;
            continue;
        }
        let dq = export_parameter(g, s, options, opset)?;
        g.set_op_input(s.op, s.slot, Some(dq))?;
        done.push((s.var, s.config.clone(), dq));
    }
    for (var, _, _) in &done {
        let v = g.variable(*var)?;
        if v.consumers().is_empty() && !g.is_graph_input(*var) && !g.is_graph_output(*var) {
            g.remove_variable(*var)?;
        }
    }
    Ok(())
}

/// A block-wise weight as its codes + opset 21's blocked `DequantizeLinear`.
fn export_blocked(g: &mut Graph, s: &Site, base: &str, data: &[f32], shape: &[usize], opset: i64) -> Result<VarId> {
    let (grid, codes) = blocked_codes(data, shape, &s.config).map_err(|m| unsupported(g, s.op, s.var, m))?;
    let (pshape, scale, zp) = blocked_params_shape(shape, &s.config, &grid);
    let q = int_tensor(s.format.dtype, shape.to_vec(), &codes)?;
    let qv = g.add_initializer(g.fresh_var_name(&format!("{base}_quantized")), q)?;
    // The scale's type is DequantizeLinear's output type: the weight's own.
    let float_type = g.variable(s.var)?.value.as_ref().map_or(DataType::Float, |t| t.dtype());
    let scale = TensorData::from_f32_as(float_type, pshape.clone(), &scale)?;
    let sc = g.add_initializer(g.fresh_var_name(&format!("{base}_scale")), scale)?;
    let mut inputs = vec![Some(qv), Some(sc)];
    if !s.config.policy.is_symmetric() {
        inputs.push(Some(g.add_initializer(
            g.fresh_var_name(&format!("{base}_zero_point")),
            int_tensor(s.format.dtype, pshape, &zp)?,
        )?));
    }
    let dst = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_dequantized"))))?;
    let Some(block) = s.config.block else { return Err(unsupported(g, s.op, s.var, "not a block-wise config".into())) };
    let dq = Operation::new("DequantizeLinear", g.fresh_op_name(&format!("{base}_DequantizeLinear")))
        .with_opset(opset)
        .with_attr("axis", Attribute::Int(block.axis as i64))
        .with_attr("block_size", Attribute::Int(block.size as i64));
    g.add_operation(dq, &inputs, &[Some(dst)])?;
    Ok(dst)
}

/// Writes one parameter: int initializer + DQ, Q/DQ on the float value, or (bias with
/// `quantize_bias` off) the fake-quantized float values. Returns what the consumer reads.
fn export_parameter(g: &mut Graph, s: &Site, options: &QdqOptions, opset: i64) -> Result<VarId> {
    let v = g.variable(s.var)?;
    let base = v.name.clone();
    let value = v.value.clone().ok_or_else(|| unsupported(g, s.op, s.var, "parameter without value".into()))?;
    let is_bias = s.config.num_of_bits > 16;
    let floating = s.config.policy.is_floating();
    if floating || !options.weights_as_integers && !is_bias {
        let dst = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_dequantized"))))?;
        add_pair(g, s.var, dst, &s.config, s.format, opset)?;
        return Ok(dst);
    }
    let data = value.to_f32_vec().map_err(|e| unsupported(g, s.op, s.var, e.to_string()))?;
    if s.config.block.is_some() {
        return export_blocked(g, s, &base, &data, value.shape(), opset);
    }
    let ints = quantize_values(&data, value.shape(), &s.config).map_err(|m| unsupported(g, s.op, s.var, m))?;
    if is_bias && !options.quantize_bias {
        let fq = dequantize_values(&ints, value.shape(), &s.config);
        let t = TensorData::from_vec(value.shape().to_vec(), &fq)?;
        return Ok(g.add_initializer(g.fresh_var_name(&format!("{base}_fake_quantized")), t)?);
    }
    let q = int_tensor(s.format.dtype, value.shape().to_vec(), &ints)?;
    let qv = g.add_initializer(g.fresh_var_name(&format!("{base}_quantized")), q)?;
    let (sc, z) = qparams(g, &base, &s.config, s.format.dtype)?;
    let dst = g.add_variable(Variable::new(g.fresh_var_name(&format!("{base}_dequantized"))))?;
    let dq = qdq_op(g, "DequantizeLinear", &base, &s.config, opset);
    g.add_operation(dq, &[Some(qv), Some(sc), Some(z)], &[Some(dst)])?;
    Ok(dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::quant::{ConfigLocation, ConfigSide, OperationQuantConfig, QuantizationPolicy, QuantizationProperty};

    fn act(scale: f32, offset: f32) -> TensorQuantConfig {
        let mut c = TensorQuantConfig::linear(8, false, None).unwrap();
        c.scale = vec![scale];
        c.offset = vec![offset];
        c.state = QuantizationState::Activated;
        c
    }

    fn weight(scales: Vec<f32>, axis: usize) -> TensorQuantConfig {
        let mut c = TensorQuantConfig::linear(7, true, Some(axis)).unwrap();
        c.offset = vec![0.0; scales.len()];
        c.scale = scales;
        c.state = QuantizationState::Activated;
        c
    }

    /// x → Conv(W, B) → y → Relu → z (output); y → Sigmoid (own input config, Overlapped
    /// output) → p (output).
    fn model() -> Model {
        let mut g = Graph::new("t");
        let x = g.add_variable(Variable::new("x")).unwrap();
        g.add_graph_input(x).unwrap();
        let w = g
            .add_initializer(
                "W",
                TensorData::from_vec(vec![3, 2, 1, 1], &[0.5f32, -0.25, 0.1, 0.2, -0.63, 0.3]).unwrap(),
            )
            .unwrap();
        let b = g.add_initializer("B", TensorData::from_vec(vec![3], &[0.01f32, -0.02, 0.5]).unwrap()).unwrap();
        let [y, z, p] = ["y", "z", "p"].map(|n| g.add_variable(Variable::new(n)).unwrap());
        let conv = g.add_operation(Operation::new("Conv", "conv"), &[Some(x), Some(w), Some(b)], &[Some(y)]).unwrap();
        let relu = g.add_operation(Operation::new("Relu", "relu"), &[Some(y)], &[Some(z)]).unwrap();
        let sig = g.add_operation(Operation::new("Sigmoid", "sig"), &[Some(y)], &[Some(p)]).unwrap();
        g.add_graph_output(z).unwrap();
        g.add_graph_output(p).unwrap();
        let s_in = 0.02f32;
        let s_w = vec![0.5 / 63.0, 0.2 / 63.0, 0.63 / 63.0];
        let mut bias = TensorQuantConfig::linear(32, true, Some(0)).unwrap();
        bias.scale = s_w.iter().map(|s| s * s_in).collect();
        bias.offset = vec![0.0; 3];
        bias.state = QuantizationState::Passive;
        g.operation_mut(conv).unwrap().quant_config = Some(OperationQuantConfig {
            input_configs: vec![Some(act(s_in, 128.0)), Some(weight(s_w, 0)), Some(bias)],
            output_configs: vec![Some(act(0.01, 100.0))],
        });
        g.operation_mut(relu).unwrap().quant_config = Some(OperationQuantConfig {
            input_configs: vec![Some(act(0.01, 100.0))],
            output_configs: vec![Some(act(0.005, 0.0))],
        });
        let mut overlapped = act(0.004, 0.0);
        overlapped.state = QuantizationState::Overlapped;
        overlapped.dominated_by = Some(ConfigLocation { op: relu, side: ConfigSide::Output, index: 0 });
        g.operation_mut(sig).unwrap().quant_config = Some(OperationQuantConfig {
            input_configs: vec![Some(act(0.02, 50.0))],
            output_configs: vec![Some(overlapped)],
        });
        Model::new(g, 11)
    }

    fn ops<'a>(g: &'a Graph, ty: &str) -> Vec<&'a Operation> {
        g.operations().map(|(_, o)| o).filter(|o| o.op_type == ty).collect()
    }

    fn producer_type(g: &Graph, var: VarId) -> String {
        g.producer(var).map(|p| g.operation(p).unwrap().op_type.clone()).unwrap_or_default()
    }

    fn init(g: &Graph, name: &str) -> TensorData {
        g.variable(g.var_named(name).unwrap()).unwrap().value.clone().unwrap()
    }

    #[test]
    fn placement_weights_bias_and_names() {
        let out = export_qdq(&model(), &QdqOptions::default()).unwrap();
        let g = &out.graph;
        // x (graph input), y (shared by relu), y→sig edge, z: four activation pairs; W and B: DQ only.
        assert_eq!(ops(g, "QuantizeLinear").len(), 4);
        assert_eq!(ops(g, "DequantizeLinear").len(), 6);
        assert_eq!((out.opset(""), out.ir_version), (Some(13), 8));
        // Relu reads y's shared pair; the sigmoid's own pair reads that pair's output.
        let relu = &ops(g, "Relu")[0];
        let y_dq = relu.inputs()[0].unwrap();
        assert_eq!(producer_type(g, y_dq), "DequantizeLinear");
        let sig = &ops(g, "Sigmoid")[0];
        let sig_in = sig.inputs()[0].unwrap();
        assert_ne!(sig_in, y_dq);
        let q = g
            .operation(g.producer(g.operation(g.producer(sig_in).unwrap()).unwrap().inputs()[0].unwrap()).unwrap())
            .unwrap();
        assert_eq!((q.op_type.as_str(), q.inputs()[0]), ("QuantizeLinear", Some(y_dq)));
        assert_eq!(
            init(g, &format!("{}_scale", g.var_name(y_dq).trim_end_matches("_dequantized"))).to_f32_vec().unwrap(),
            vec![0.01]
        );
        // Overlapped output: p is the sigmoid's own output, no pair.
        let p = g.var_named("p").unwrap();
        assert_eq!(producer_type(g, p), "Sigmoid");
        // Graph output z keeps its name and is the dequantized value.
        let z = g.var_named("z").unwrap();
        assert!(g.is_graph_output(z));
        assert_eq!(producer_type(g, z), "DequantizeLinear");
        // Weight: int8 [-64, 63] per channel on axis 0; the float initializer is gone.
        assert!(g.var_id("W").is_none());
        let wq = init(g, "W_quantized");
        assert_eq!(wq.dtype(), DataType::Int8);
        // f32 division as in the simulation: -0.25 / (0.5/63) = -31.499998 → -31.
        assert_eq!(wq.to_vec::<i8>().unwrap(), vec![63, -31, 32, 63, -63, 30]);
        let conv = &ops(g, "Conv")[0];
        let w_dq = g.operation(g.producer(conv.inputs()[1].unwrap()).unwrap()).unwrap();
        assert_eq!(w_dq.attr_int("axis", -1).unwrap(), 0);
        // Bias: int32 = round(b / (s_in · s_w)), zero point 0, axis 0.
        let bq = init(g, "B_quantized").to_vec::<i32>().unwrap();
        let expect: Vec<i32> = [0.01f32, -0.02, 0.5]
            .iter()
            .zip([0.5f32 / 63.0, 0.2 / 63.0, 0.63 / 63.0])
            .map(|(b, s)| (b / (s * 0.02)).round_ties_even() as i32)
            .collect();
        assert_eq!(bq, expect);
        assert_eq!(init(g, "B_zero_point").to_vec::<i32>().unwrap(), vec![0, 0, 0]);
        let b_dq = g.operation(g.producer(conv.inputs()[2].unwrap()).unwrap()).unwrap();
        assert_eq!(b_dq.attr_int("axis", -1).unwrap(), 0);
        // Activation zero points are uint8 scalars.
        let zp = init(g, "x_zero_point");
        assert_eq!((zp.dtype(), zp.shape().len(), zp.to_vec::<u8>().unwrap()), (DataType::Uint8, 0, vec![128]));
        // The input model is untouched.
        assert!(model().graph.var_id("W").is_some());
    }

    #[test]
    fn options_change_the_output() {
        let m = model();
        let float_w = export_qdq(&m, &QdqOptions { weights_as_integers: false, ..Default::default() }).unwrap();
        let g = &float_w.graph;
        assert_eq!(init(g, "W").dtype(), DataType::Float);
        assert_eq!(ops(g, "QuantizeLinear").len(), 5);
        assert_eq!(producer_type(g, g.var_named("W_quantized").unwrap()), "QuantizeLinear");

        let float_b = export_qdq(&m, &QdqOptions { quantize_bias: false, ..Default::default() }).unwrap();
        let g = &float_b.graph;
        let b = init(g, "B_fake_quantized").to_f32_vec().unwrap();
        let s0 = 0.5f32 / 63.0 * 0.02;
        assert_eq!(b[0], ((0.01f32 / s0).round_ties_even()) * s0);
        assert_eq!(ops(g, "DequantizeLinear").len(), 5);

        let high = export_qdq(&m, &QdqOptions { min_opset: 19, ..Default::default() }).unwrap();
        for bad in [9, 99] {
            let err = export_qdq(&m, &QdqOptions { min_opset: bad, ..Default::default() }).unwrap_err().to_string();
            assert!(err.contains(&format!("`min_opset`: {bad} is not")) && err.contains("use 10"), "{err}");
        }
        assert_eq!(high.opset(""), Some(19));
        assert!(high.graph.operations().all(|(_, o)| o.opset == 19));
    }

    #[test]
    fn uncalibrated_config_is_a_typed_error_naming_op_and_tensor() {
        let mut m = model();
        let id = m.graph.op_id("relu").unwrap();
        let qc = m.graph.operation_mut(id).unwrap().quant_config.as_mut().unwrap();
        qc.output_configs[0].as_mut().unwrap().scale.clear();
        let err = export_qdq(&m, &QdqOptions::default()).unwrap_err();
        assert!(matches!(err, ExportError::NotCalibrated { .. }));
        let msg = err.to_string();
        assert!(msg.contains("`relu`") && msg.contains("`z`") && msg.contains("calibrate"), "{msg}");
    }

    fn with_relu_output(f: impl FnOnce(&mut TensorQuantConfig)) -> Model {
        let mut m = model();
        let id = m.graph.op_id("relu").unwrap();
        let qc = m.graph.operation_mut(id).unwrap().quant_config.as_mut().unwrap();
        f(qc.output_configs[0].as_mut().unwrap());
        m
    }

    #[test]
    fn low_bit_sixteen_bit_and_fp8_types_and_opsets() {
        // 4-bit activation: uint8 Q/DQ with a Clip to [0, 15·s], opset 13.
        let m = with_relu_output(|c| (c.num_of_bits, c.quant_max) = (4, 15));
        let out = export_qdq(&m, &QdqOptions::default()).unwrap();
        assert_eq!(out.opset(""), Some(13));
        assert_eq!(init(&out.graph, "z_zero_point").dtype(), DataType::Uint8);
        let clip = &ops(&out.graph, "Clip")[0];
        let hi = out.graph.variable(clip.inputs()[2].unwrap()).unwrap().value.clone().unwrap();
        assert_eq!(hi.to_f32_vec().unwrap(), vec![15.0 * 0.005]);
        // 4-bit weight: INT4 initializer (packed, low nibble first) at opset 21, IR 10.
        let mut m = model();
        let conv = m.graph.op_id("conv").unwrap();
        let qc = m.graph.operation_mut(conv).unwrap().quant_config.as_mut().unwrap();
        let w = qc.input_configs[1].as_mut().unwrap();
        (w.num_of_bits, w.quant_min, w.quant_max) = (4, -8, 7);
        w.scale = vec![0.5 / 7.0, 0.2 / 7.0, 0.63 / 7.0];
        let out = export_qdq(&m, &QdqOptions::default()).unwrap();
        assert_eq!((out.opset(""), out.ir_version), (Some(21), 10));
        let wq = init(&out.graph, "W_quantized");
        assert_eq!(wq.dtype(), DataType::Int4);
        // Values [7, -3, 4, 7, -7, 3] (f32 division: -0.25 / (0.5/7) = -3.4999998): pairs low nibble first.
        assert_eq!(wq.packed().unwrap(), &[0xd7, 0x74, 0x39]);
        // 6 bits: uint8 Q with a Clip to [(0−o)·s, (63−o)·s] before it, opset stays 13.
        let m = with_relu_output(|c| (c.num_of_bits, c.quant_max) = (6, 63));
        let out = export_qdq(&m, &QdqOptions::default()).unwrap();
        assert_eq!(out.opset(""), Some(13));
        let clip = &ops(&out.graph, "Clip")[0];
        let hi = out.graph.variable(clip.inputs()[2].unwrap()).unwrap().value.clone().unwrap();
        assert_eq!(hi.to_f32_vec().unwrap(), vec![63.0 * 0.005]);
        // 16 bits: UINT16 at opset 21.
        let m = with_relu_output(|c| (c.num_of_bits, c.quant_max) = (16, 65535));
        let out = export_qdq(&m, &QdqOptions::default()).unwrap();
        assert_eq!(init(&out.graph, "z_zero_point").dtype(), DataType::Uint16);
        assert_eq!(out.opset(""), Some(21));
        // FP8 E4M3: FLOAT8E4M3FN at opset 19.
        let m = with_relu_output(|c| {
            c.policy = QuantizationPolicy::new(&[
                QuantizationProperty::PerTensor,
                QuantizationProperty::Floating,
                QuantizationProperty::Symmetric,
            ])
            .unwrap();
            (c.num_of_bits, c.exponent_bits, c.mantissa_bits, c.quant_min, c.quant_max) = (8, 4, 3, -448, 448);
            c.offset = vec![0.0];
        });
        let err = export_qdq(&m, &QdqOptions::default()).unwrap_err().to_string();
        assert!(err.contains("`relu`") && err.contains("`z`") && err.contains("allow_fp8"), "{err}");
        let out = export_qdq(&m, &QdqOptions { allow_fp8: true, ..Default::default() }).unwrap();
        assert_eq!((out.opset(""), out.ir_version), (Some(19), 9));
        assert_eq!(init(&out.graph, "z_zero_point").dtype(), DataType::Float8E4M3FN);
    }

    #[test]
    fn opset_raise_converts_ops_whose_meaning_changed() {
        // A ReduceMean with an `axes` attribute (opset 11) in a 16-bit export (opset 21): the axes
        // become an input.
        let mut m = with_relu_output(|c| (c.num_of_bits, c.quant_max) = (16, 65535));
        let g = &mut m.graph;
        let z = g.var_named("z").unwrap();
        let r = g.add_variable(Variable::new("r")).unwrap();
        let op = Operation::new("ReduceMean", "mean").with_attr("axes", Attribute::Ints(vec![1]));
        g.add_operation(op, &[Some(z)], &[Some(r)]).unwrap();
        let out = export_qdq(&m, &QdqOptions::default()).unwrap();
        assert_eq!(out.opset(""), Some(21));
        let mean = &ops(&out.graph, "ReduceMean")[0];
        assert!(mean.attr("axes").is_none() && mean.opset == 21);
        let axes = out.graph.variable(mean.inputs()[1].unwrap()).unwrap().value.clone().unwrap();
        assert_eq!(axes.to_i64_vec().unwrap(), [1]);

        // Softmax before 13 flattens around axis 1: rewritten whatever its axis.
        for axis in [None, Some(1), Some(-1)] {
            let mut m = with_relu_output(|c| (c.num_of_bits, c.quant_max) = (16, 65535));
            let g = &mut m.graph;
            let z = g.var_named("z").unwrap();
            let r = g.add_variable(Variable::new("r")).unwrap();
            let mut op = Operation::new("Softmax", "sm");
            if let Some(a) = axis {
                op = op.with_attr("axis", Attribute::Int(a));
            }
            g.add_operation(op, &[Some(z)], &[Some(r)]).unwrap();
            let out = export_qdq(&m, &QdqOptions::default()).unwrap();
            assert_eq!(ops(&out.graph, "Flatten").len(), usize::from(axis != Some(-1)), "{axis:?}");
            assert_eq!(ops(&out.graph, "Softmax")[0].attr_int("axis", 0).unwrap(), -1);
        }
    }

    #[test]
    fn opset_raise_refuses_what_cannot_be_converted() {
        // BatchNormalization with per-element statistics (spatial = 0) has no form from opset 9.
        let mut m = model();
        m.opset_imports.insert(String::new(), 8);
        let g = &mut m.graph;
        let z = g.var_named("z").unwrap();
        let r = g.add_variable(Variable::new("r")).unwrap();
        let bn = Operation::new("BatchNormalization", "bn").with_opset(8).with_attr("spatial", Attribute::Int(0));
        g.add_operation(bn, &[Some(z)], &[Some(r)]).unwrap();
        let err = export_qdq(&m, &QdqOptions::default()).unwrap_err().to_string();
        assert!(
            err.contains("from 8 to 13 (needed for per-channel Q/DQ)")
                && err.contains("`bn` (BatchNormalization, opset 8)")
                && err.contains("spatial"),
            "{err}"
        );
        let pre = preflight_qdq(&m.graph, 8, &QdqOptions::default()).unwrap_err().to_string();
        assert_eq!(pre, err);
    }

    #[test]
    fn activation_rounding_other_than_half_even_is_refused() {
        let m = with_relu_output(|c| c.rounding = RoundingPolicy::HalfUp);
        let err = export_qdq(&m, &QdqOptions::default()).unwrap_err().to_string();
        assert!(err.contains("`relu`") && err.contains("half_even"), "{err}");
    }
}
