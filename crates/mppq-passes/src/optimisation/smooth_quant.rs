//! `smooth_quant`: activation equalization for MatMul/Gemm (Xiao et al., "SmoothQuant", 2023).
//! A few input channels of a transformer's activations are often 10–100× larger than the rest,
//! and one per-tensor activation scale then wastes most of its levels on them. For an activation
//! `x` read by weighted MatMul/Gemm operations, input channel k is divided by
//! s_k = max|x_k|^α / max|W_k|^(1−α) and the matching weight rows multiplied by it: the float
//! model computes the same, the activation's outlier channels shrink and the weights take them.
//!
//! The division is folded into the producer when every reader of `x` is smoothed and the producer
//! is a LayerNormalization (scale and bias) or a Mul by a constant of its own; otherwise a `Mul`
//! by 1/s is inserted before the smoothed readers, which then quantize the smoothed activation
//! themselves (the unsmoothed one is left in float when nothing else reads it).
//! `alpha_search` picks α per activation among 0.3–0.8 by the error of the smoothed operations on
//! a sample of calibration rows (fake-quantized as their configs say, per-tensor min/max for the
//! activation), instead of one α for all.

use crate::error::{InPass, Result};
use crate::runtime::guard::Guard;
use crate::runtime::params::{InputChannels, ParamView, input_channels, max_over_median, op_params, write_param};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::statistics::{GraphMode, StatRequest, Statistic};
use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, config_at_mut};
use mppq_ir::{Graph, OpClass, OpId, Operation, TensorData, VarId, Variable, op_roles};
use serde::{Deserialize, Serialize};

/// The knobs of `smooth_quant` (settings section `smooth_quant`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmoothQuantSetting {
    /// On or off; absent: on from `optimize` level 2.
    pub enabled: Option<bool>,
    /// Migration strength: 0 leaves the activation alone, 1 moves all of its range into weights.
    pub alpha: f32,
    /// The strength on transformer graphs (attention found by `transformer_blocks`), whose
    /// outlier channels are larger: all-MiniLM-L6-v2 in ONNX Runtime, 14.5 dB at 0.5, 22.6 at
    /// 0.8, 21.5 at 0.95 (NNCF's transformer preset uses 0.95).
    pub transformer_alpha: f32,
    /// Choose α per activation (0.3, 0.4, …, 0.8) by the smoothed operations' output error.
    pub alpha_search: bool,
    /// Smooth only activations whose largest channel is at least this many times their median
    /// channel (no outliers, nothing to gain).
    pub min_outlier_ratio: f32,
}

impl Default for SmoothQuantSetting {
    fn default() -> Self {
        Self { enabled: None, alpha: 0.5, transformer_alpha: 0.8, alpha_search: false, min_outlier_ratio: 4.0 }
    }
}

/// One activation and the weighted operations that read it.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) activation: VarId,
    pub(crate) readers: Vec<(OpId, ParamView, InputChannels)>,
    /// Whether every reader of the activation is smoothed.
    pub(crate) all_readers: bool,
}

/// Activations read, in slot 0, by quantized MatMul/Gemm operations with a weight initializer of
/// their own. The activation must be quantized: with a float activation (weight-only
/// quantization) there is no activation difficulty to move into the weight.
fn find_targets(graph: &Graph) -> Vec<Target> {
    find_targets_where(graph, |op| {
        op.quant_config.as_ref().is_some_and(|c| c.input_configs.first().is_some_and(Option::is_some))
    })
}

/// Activations read, in slot 0, by MatMul/Gemm operations with a weight initializer of their own
/// that `reads` accepts (SmoothQuant: a quantized activation; AWQ: a block-wise weight).
pub(crate) fn find_targets_where(graph: &Graph, reads: impl Fn(&mppq_ir::Operation) -> bool) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    for (id, op) in graph.operations() {
        // A dense weighted linear operation (MatMul, Gemm): no convolution.
        let roles = op_roles(op);
        if !roles.is(OpClass::WeightedLinear) || roles.is(OpClass::Convolution) || !reads(op) {
            continue;
        }
        let Some(Some(x)) = op.inputs().first().copied() else { continue };
        if graph.variable(x).is_ok_and(|v| v.is_parameter()) {
            continue;
        }
        let Ok(params) = op_params(graph, id) else { continue };
        let Some(weight) = params.weight.filter(|w| graph.consumers(w.var).len() == 1) else { continue };
        let Some(channels) = input_channels(graph, id, &weight) else { continue };
        match targets.iter_mut().find(|t| t.activation == x) {
            Some(t) => t.readers.push((id, weight, channels)),
            None => targets.push(Target { activation: x, readers: vec![(id, weight, channels)], all_readers: false }),
        }
    }
    for t in &mut targets {
        t.all_readers = graph.consumers(t.activation).len() == t.readers.len();
    }
    targets
}

/// The pass.
#[derive(Default)]
pub struct SmoothQuant {
    pub setting: SmoothQuantSetting,
    /// Smooth transformer graphs only (the default at `optimize` 1: their outliers are what
    /// SmoothQuant is for; CNNs get it from level 2).
    pub only_transformers: bool,
}

impl SmoothQuant {
    /// Whether this run smooths `graph`, and at which α (`None`: it does not).
    fn alpha_for(&self, graph: &Graph) -> Option<f32> {
        let transformer = !crate::configuration::transformer_blocks::attention_blocks(graph).is_empty();
        match (transformer, self.only_transformers) {
            (true, _) => Some(self.setting.transformer_alpha),
            (false, false) => Some(self.setting.alpha),
            (false, true) => None,
        }
    }
}

impl Pass for SmoothQuant {
    fn name(&self) -> &'static str {
        "smooth_quant"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn statistics(&self, graph: &Graph) -> Result<Vec<StatRequest>> {
        if self.alpha_for(graph).is_none() {
            return Ok(Vec::new());
        }
        Ok(find_targets(graph)
            .iter()
            .map(|t| StatRequest::new(t.activation, Statistic::LastAxisRange, GraphMode::Float))
            .collect())
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let name = self.name();
        let s = self.setting.clone();
        let Some(default_alpha) = self.alpha_for(ctx.graph) else {
            return Ok(PassReport::new(
                name,
                0,
                "no attention: SmoothQuant joins at optimize level 2 for other graphs",
            ));
        };
        let targets = find_targets(ctx.graph);
        let mut smoothed = Vec::new();
        let mut searched = Vec::new();
        for target in &targets {
            let Some(ranges) = ctx.statistics.last_axis_ranges(target.activation, GraphMode::Float) else { continue };
            let act: Vec<f32> = ranges.iter().map(|(lo, hi)| lo.abs().max(hi.abs())).collect();
            if target.readers.iter().any(|(_, _, c)| c.count() != act.len())
                || max_over_median(&act) < s.min_outlier_ratio
            {
                continue;
            }
            let mut weight_max = vec![0f32; act.len()];
            for (_, w, channels) in &target.readers {
                let reader_max = w.abs_max_by(act.len(), |i| channels.channel_of(i));
                weight_max.iter_mut().zip(reader_max).for_each(|(m, r)| *m = m.max(r));
            }
            let alpha = if s.alpha_search {
                let chosen = search_alpha(ctx, target, &act, &weight_max)?;
                searched.push(format!("{}: α {chosen}", ctx.graph.var_name(target.activation)));
                chosen
            } else {
                default_alpha
            };
            let scales = smoothing_scales(&act, &weight_max, alpha);
            apply(ctx.graph, target, &scales)?;
            smoothed.push(ctx.graph.var_name(target.activation).to_string());
        }
        let mut summary =
            format!("{} of {} MatMul/Gemm activations smoothed (α {default_alpha})", smoothed.len(), targets.len());
        if !searched.is_empty() {
            summary = format!("{summary}; searched {}", searched.join(", "));
        }
        Ok(PassReport::new(name, smoothed.len(), summary))
    }
}

/// s_k = max|x_k|^α / max|W_k|^(1−α), 1 where either is zero, kept in [1e-4, 1e4].
fn smoothing_scales(act: &[f32], weight_max: &[f32], alpha: f32) -> Vec<f32> {
    act.iter()
        .zip(weight_max)
        .map(|(a, w)| if *a > 0.0 && *w > 0.0 { (a.powf(alpha) / w.powf(1.0 - alpha)).clamp(1e-4, 1e4) } else { 1.0 })
        .collect()
}

/// Multiplies the readers' weight rows by `scales` and divides the activation by them.
pub(crate) fn apply(graph: &mut Graph, target: &Target, scales: &[f32]) -> Result<()> {
    let name = "smooth_quant";
    for (_, weight, channels) in &target.readers {
        let mut w = weight.clone();
        for (i, v) in w.values.iter_mut().enumerate() {
            *v *= scales[channels.channel_of(i)];
        }
        write_param(graph, &w)?;
    }
    let inverse: Vec<f32> = scales.iter().map(|s| 1.0 / s).collect();
    if target.all_readers && fold_into_producer(graph, target.activation, &inverse).in_pass(name)? {
        return Ok(());
    }
    // A Mul by 1/s before the smoothed readers.
    let x = target.activation;
    let base = graph.var_name(x).to_string();
    let factor_name = graph.fresh_var_name(&format!("{base}.smooth_quant.scale"));
    let data = TensorData::from_vec(vec![inverse.len()], &inverse).in_pass(name)?;
    let factor = graph.add_initializer(factor_name, data).in_pass(name)?;
    let smoothed =
        graph.add_variable(Variable::new(graph.fresh_var_name(&format!("{base}.smoothed")))).in_pass(name)?;
    let mul = Operation::new("Mul", graph.fresh_op_name(&format!("{base}.smooth_quant")));
    graph.add_operation(mul, &[Some(x), Some(factor)], &[Some(smoothed)]).in_pass(name)?;
    for (op, _, _) in &target.readers {
        graph.set_op_input(*op, 0, Some(smoothed)).in_pass(name)?;
        // The reader quantizes the smoothed activation itself, even where it left that to the
        // producer before.
        let loc = ConfigLocation { op: *op, side: ConfigSide::Input, index: 0 };
        if let Some(c) = config_at_mut(graph, loc).filter(|c| c.state == QuantizationState::Overlapped) {
            c.detach();
        }
    }
    // With every reader smoothed, the unsmoothed activation is not quantized: its outlier
    // channels would cost the precision the smoothing wins.
    if target.all_readers
        && let Some(producer) = graph.producer(x)
    {
        let slot = graph.operation(producer).in_pass(name)?.outputs().iter().position(|o| *o == Some(x));
        let loc = slot.map(|index| ConfigLocation { op: producer, side: ConfigSide::Output, index });
        if let Some(c) = loc.and_then(|loc| config_at_mut(graph, loc)).filter(|c| c.state == QuantizationState::Initial)
        {
            c.state = QuantizationState::Fp32;
        }
    }
    Ok(())
}

/// Divides `x` by s inside its producer, when the producer allows it exactly and its parameters
/// are its own: a LayerNormalization over the last axis (scale and bias), or a Mul by a constant
/// (the constant, broadcast over the last axis). `false` when it does not.
fn fold_into_producer(graph: &mut Graph, x: VarId, inverse: &[f32]) -> mppq_ir::Result<bool> {
    let Some(producer) = graph.producer(x) else { return Ok(false) };
    let op = graph.operation(producer)?;
    let owned = |v: &VarId| graph.consumers(*v).len() == 1 && graph.variable(*v).is_ok_and(|v| v.value.is_some());
    match op.op_type.as_str() {
        "LayerNormalization" => fold_into_layer_norm(graph, producer, inverse),
        "Mul" => {
            let constants: Vec<VarId> = op.inputs().iter().flatten().copied().filter(owned).collect();
            let [constant] = constants[..] else { return Ok(false) };
            let v = graph.variable_mut(constant)?;
            let Some(t) = v.value.as_ref() else { return Ok(false) };
            let k = inverse.len();
            // A scalar or a vector along the last axis ([K] or [1, …, 1, K]) folds exactly.
            let shape = t.shape().to_vec();
            let numel: usize = shape.iter().product();
            let folds = numel == 1 || (shape.last() == Some(&k) && numel == k);
            if !folds || !t.dtype().is_float() {
                return Ok(false);
            }
            let old = t.to_f32_vec()?;
            let values: Vec<f32> = inverse.iter().enumerate().map(|(i, s)| old[i % old.len()] * s).collect();
            let shape = if numel == 1 { vec![k] } else { shape };
            v.value = Some(TensorData::from_f32_as(t.dtype(), shape, &values)?);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Divides the scale and bias of LayerNormalization `norm` by s when it normalises the last axis
/// and they are initializers of its own; `false` otherwise.
fn fold_into_layer_norm(graph: &mut Graph, norm: OpId, inverse: &[f32]) -> mppq_ir::Result<bool> {
    let op = graph.operation(norm)?;
    if op.attr_int("axis", -1)? != -1 {
        return Ok(false);
    }
    let params: Vec<VarId> = op.inputs().iter().skip(1).flatten().copied().collect();
    let owned = |v: &VarId| {
        graph.consumers(*v).len() == 1
            && graph.variable(*v).ok().and_then(|v| v.value.as_ref()).is_some_and(|t| t.shape() == [inverse.len()])
    };
    if params.is_empty() || !params.iter().all(owned) {
        return Ok(false);
    }
    for var in params {
        let v = graph.variable_mut(var)?;
        let Some(t) = v.value.as_ref() else { continue };
        let values: Vec<f32> = t.to_f32_vec()?.iter().zip(inverse).map(|(a, b)| a * b).collect();
        v.value = Some(TensorData::from_f32_as(t.dtype(), t.shape().to_vec(), &values)?);
    }
    Ok(true)
}

/// Rows of the activation sampled for the α search, and the most kept.
const SEARCH_ROWS: usize = 64;
/// Weights larger than this (K·N) are smoothed with the configured α (the search's float
/// products would cost more than they save).
const SEARCH_MAX_WEIGHT: usize = 1 << 22;

/// The α of 0.3, 0.4, …, 0.8 whose smoothed readers have the lowest output error on sampled rows,
/// with the activation fake-quantized per tensor (8-bit asymmetric min/max) and each weight as
/// its config says (bits, per channel or per tensor; symmetric).
fn search_alpha(ctx: &mut PassContext<'_>, target: &Target, act: &[f32], weight_max: &[f32]) -> Result<f32> {
    let fallback = 0.5;
    let k = act.len();
    if target.readers.iter().any(|(_, w, _)| w.values.len() > SEARCH_MAX_WEIGHT) {
        return Ok(fallback);
    }
    let rows = sample_rows(ctx, target.activation, k)?;
    if rows.is_empty() {
        return Ok(fallback);
    }
    let mut best = (f64::INFINITY, fallback);
    for step in 3..=8 {
        let alpha = step as f32 / 10.0;
        let scales = smoothing_scales(act, weight_max, alpha);
        let mut error = 0f64;
        for (op, weight, channels) in &target.readers {
            let bits = weight_bits(ctx.graph, *op);
            error += reader_error(&rows, k, weight, channels, &scales, bits);
        }
        if error < best.0 {
            best = (error, alpha);
        }
    }
    Ok(best.1)
}

/// Weight bits and whether per channel, from the reader's weight config (8, per channel).
fn weight_bits(graph: &Graph, op: OpId) -> (u32, bool) {
    let config =
        graph.operation(op).ok().and_then(|o| o.quant_config.as_ref()).and_then(|c| c.input_configs.get(1).cloned());
    match config.flatten() {
        Some(c) if c.state != QuantizationState::Fp32 => (c.num_of_bits, c.channel_axis.is_some()),
        _ => (8, true),
    }
}

/// Up to [`SEARCH_ROWS`] rows of `x` (`[…, K]`) from the first calibration batches.
pub(crate) fn sample_rows(ctx: &mut PassContext<'_>, x: VarId, k: usize) -> Result<Vec<f32>> {
    let exec = ctx.executor("smooth_quant")?;
    let (reader, slot) = match ctx.graph.consumers(x).first() {
        Some(op) => {
            (*op, ctx.graph.operation(*op).in_pass("smooth_quant")?.inputs().iter().position(|i| *i == Some(x)))
        }
        None => return Ok(Vec::new()),
    };
    let Some(slot) = slot else { return Ok(Vec::new()) };
    struct Rows {
        at: (OpId, usize),
        k: usize,
        rows: Vec<f32>,
    }
    impl mppq_exec::hooks::TensorTap for Rows {
        fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &mppq_exec::Value) {
            if (op, slot) != self.at || side != ConfigSide::Input || self.rows.len() >= SEARCH_ROWS * self.k {
                return;
            }
            if let mppq_exec::Value::Tensor(t) = value {
                let values = t.to_f32_vec();
                let n = values.len() / self.k.max(1);
                let stride = (n / SEARCH_ROWS).max(1);
                for r in (0..n).step_by(stride) {
                    if self.rows.len() >= SEARCH_ROWS * self.k {
                        break;
                    }
                    self.rows.extend_from_slice(&values[r * self.k..(r + 1) * self.k]);
                }
            }
        }
    }
    let mut hook = mppq_exec::hooks::Tap(Rows { at: (reader, slot), k, rows: Vec::new() });
    for b in 0..ctx.data.batch_count().min(4) {
        let feeds = ctx.batch(b, "smooth_quant")?;
        exec.run(feeds, &mut [&mut hook]).in_pass("smooth_quant")?;
    }
    Ok(hook.0.rows)
}

/// Symmetric fake-quant of `values` with `bits`, one scale per group of `group_of`.
fn fake_quant_symmetric(values: &mut [f32], bits: u32, groups: usize, group_of: impl Fn(usize) -> usize) {
    let q = ((1i64 << (bits.clamp(2, 16) - 1)) - 1) as f32;
    let mut max = vec![0f32; groups];
    for (i, v) in values.iter().enumerate() {
        max[group_of(i)] = max[group_of(i)].max(v.abs());
    }
    for (i, v) in values.iter_mut().enumerate() {
        let scale = max[group_of(i)] / q;
        if scale > 0.0 {
            *v = (*v / scale).round().clamp(-q, q) * scale;
        }
    }
}

/// Squared output error of one reader, smoothed by `scales`, on `rows` (`[n, K]`).
fn reader_error(
    rows: &[f32],
    k: usize,
    weight: &ParamView,
    channels: &InputChannels,
    scales: &[f32],
    (bits, per_channel): (u32, bool),
) -> f64 {
    let n = rows.len() / k;
    let out_channels = weight.values.len() / k.max(1);
    // The weight as a [K, N] matrix, float and smoothed + fake-quantized.
    let mut float_w = vec![0f32; k * out_channels];
    let mut smooth_w = vec![0f32; k * out_channels];
    let mut col_of_out = vec![0usize; weight.values.len()];
    let mut next_col = vec![0usize; k];
    for (i, v) in weight.values.iter().enumerate() {
        let c = channels.channel_of(i);
        let col = next_col[c];
        next_col[c] += 1;
        col_of_out[i] = col;
        float_w[c * out_channels + col] = *v;
        smooth_w[c * out_channels + col] = v * scales[c];
    }
    if per_channel {
        fake_quant_symmetric(&mut smooth_w, bits, out_channels, |i| i % out_channels);
    } else {
        fake_quant_symmetric(&mut smooth_w, bits, 1, |_| 0);
    }
    // The activation, smoothed and fake-quantized per tensor (asymmetric 8-bit min/max).
    let smooth_x: Vec<f32> = rows.iter().enumerate().map(|(i, v)| v / scales[i % k]).collect();
    let (lo, hi) = smooth_x.iter().fold((0f32, 0f32), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let step = ((hi - lo) / 255.0).max(f32::MIN_POSITIVE);
    let quant_x: Vec<f32> = smooth_x.iter().map(|v| ((v - lo) / step).round() * step + lo).collect();
    let mut error = 0f64;
    for r in 0..n {
        for o in 0..out_channels {
            let (mut exact, mut approx) = (0f32, 0f32);
            for c in 0..k {
                exact += rows[r * k + c] * float_w[c * out_channels + o];
                approx += quant_x[r * k + c] * smooth_w[c * out_channels + o];
            }
            error += f64::from(exact - approx).powi(2);
        }
    }
    error
}
