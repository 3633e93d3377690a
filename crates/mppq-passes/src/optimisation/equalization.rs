//! `equalization`: cross-layer equalization (Nagel et al., "Data-Free Quantization", 2019; PPQ's
//! `LayerwiseEqualizationPass`). For a weighted operation A whose output reaches a weighted
//! operation B only through operations that commute with a positive per-channel scale
//! (Relu, LeakyRelu, PRelu, max and average pooling, Identity, Dropout; Flatten right after a
//! global pooling), output channel c of A is multiplied by s_c and input channel c of B divided
//! by it: the float model computes the same, and with s_c = √(r2_c / r1_c) both weights' channel
//! ranges become √(r1_c · r2_c), which per-tensor weight quantization needs most. Iterated until
//! the scales settle (chains A → B → C share B).
//!
//! Options: the bias of A and the activation range between A and B can count in r1 (PPQ's
//! `including_bias`, `including_act`); high-bias absorption then moves the part of A's bias
//! that the Relu never cuts into B's bias, where that is exact (B reads the activation without
//! padding). Clip (ReLU6) is not crossed: its bound would need a per-channel rescale that Clip
//! cannot hold. Residual Adds are not crossed either (every branch would need the same scale).

use crate::error::{InPass, Result};
use crate::runtime::guard::Guard;
use crate::runtime::params::{InputChannels, ParamView, input_channels, op_params, write_param};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::statistics::{GraphMode, StatRequest, Statistic};
use mppq_ir::{ChannelAxis, Graph, OpClass, OpId, VarId, op_roles};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The knobs of `equalization` (settings section `equalization`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EqualizationSetting {
    /// On or off; absent: on from `optimize` level 2.
    pub enabled: Option<bool>,
    /// Rounds over all pairs (stops early once no scale moves by more than 0.01 %).
    pub iterations: usize,
    /// Count |bias| · `bias_multiplier` in A's channel range.
    pub including_bias: bool,
    pub bias_multiplier: f32,
    /// Count the activation's channel range · `act_multiplier` in A's channel range.
    pub including_act: bool,
    pub act_multiplier: f32,
    /// Move the bias A's Relu never cuts into B (high-bias absorption).
    pub absorb_high_bias: bool,
    /// Per-round scales are kept in [1/max_scale, max_scale].
    pub max_scale: f32,
    /// Cross `Clip(0, b)` (ReLU6) by removing its upper bound, as DFQ and AIMET do: not exact
    /// where activations exceed `b`, so the float model changes there (the guard measures it
    /// against the original model and undoes the pass if that hurts).
    pub clip_as_relu: bool,
}

impl Default for EqualizationSetting {
    fn default() -> Self {
        Self {
            enabled: None,
            iterations: 10,
            including_bias: false,
            bias_multiplier: 0.5,
            including_act: false,
            act_multiplier: 0.5,
            absorb_high_bias: true,
            max_scale: 10.0,
            clip_as_relu: false,
        }
    }
}

/// Operations that commute with a positive per-channel scale: f(s·x) = s·f(x).
const SCALE_COMMUTING: &[&str] = &[
    "Relu",
    "LeakyRelu",
    "PRelu",
    "MaxPool",
    "AveragePool",
    "GlobalMaxPool",
    "GlobalAveragePool",
    "Identity",
    "Dropout",
];

/// One pair of weighted operations and what lies between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    pub up: OpId,
    pub down: OpId,
    /// A's output (before the relays).
    pub up_output: VarId,
    /// B's input (after the relays).
    pub down_input: VarId,
    /// The relay operation types between them, in order.
    pub relays: Vec<String>,
}

/// The variable `var`'s only consumer, if it has exactly one and is not a graph output.
fn single_consumer(graph: &Graph, var: VarId) -> Option<OpId> {
    let consumers = graph.consumers(var);
    (consumers.len() == 1 && !graph.outputs().contains(&var)).then(|| consumers[0])
}

/// Whether `op` reads a float weight initializer no other operation reads.
fn owns_weight(graph: &Graph, op: OpId) -> bool {
    op_params(graph, op).ok().and_then(|p| p.weight).is_some_and(|w| graph.consumers(w.var).len() == 1)
}

/// Whether `op` is a Clip with a constant lower bound of 0 (ReLU6 and the like).
fn is_relu_like_clip(graph: &Graph, op: &mppq_ir::Operation) -> bool {
    if op.op_type != "Clip" {
        return false;
    }
    let from_input = op.inputs().get(1).copied().flatten().map(|v| {
        graph
            .variable(v)
            .ok()
            .and_then(|v| v.value.as_ref())
            .and_then(|t| t.to_f32_vec().ok())
            .is_some_and(|v| v == [0.0])
    });
    match from_input {
        Some(zero) => zero,
        // Before opset 11 the bounds are attributes.
        None => op.attr("min").is_some() && op.attr_float("min", f32::MIN).is_ok_and(|m| m == 0.0),
    }
}

/// Every equalizable pair of `graph` (crossing `Clip(0, b)` too when `clip_as_relu`).
pub fn find_pairs(graph: &Graph, clip_as_relu: bool) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for (up, op) in graph.operations() {
        // Weighted linear operations (Conv, ConvTranspose, Gemm, MatMul), a grouped
        // ConvTranspose excepted (its channels do not line up with the next weight's).
        let roles = op_roles(op);
        if !roles.is(OpClass::WeightedLinear) || !owns_weight(graph, up) {
            continue;
        }
        if roles.weight().is_some_and(|(_, _, group)| group != 1) {
            continue;
        }
        let Some(Some(up_output)) = op.outputs().first().copied() else { continue };
        let mut current = up_output;
        let mut relays: Vec<String> = Vec::new();
        while let Some(next) = single_consumer(graph, current) {
            let Ok(next_op) = graph.operation(next) else { break };
            if next_op.inputs().first().copied().flatten() != Some(current) {
                break;
            }
            let kind = next_op.op_type.as_str();
            let next_roles = op_roles(next_op);
            if next_roles.is(OpClass::WeightedLinear) {
                // Channels meet on axis 1 between convolutions, on the last axis between dense
                // operations, and a flattened global pooling turns the first into the second.
                let layouts_match = match (roles.is(OpClass::Convolution), next_roles.is(OpClass::Convolution)) {
                    (true, true) | (false, false) => true,
                    (true, false) => relays.iter().any(|r| r == "Flatten"),
                    (false, true) => false,
                };
                if layouts_match && owns_weight(graph, next) {
                    pairs.push(Pair { up, down: next, up_output, down_input: current, relays });
                }
                break;
            }
            let after_global_pool = relays.last().is_some_and(|r| r.starts_with("Global"));
            let commutes = SCALE_COMMUTING.contains(&kind)
                || (kind == "Flatten" && after_global_pool)
                || (clip_as_relu && is_relu_like_clip(graph, next_op));
            // Every other input must be a constant (PRelu's slope), never a second activation.
            let constant_rest =
                next_op.inputs().iter().skip(1).flatten().all(|v| graph.variable(*v).is_ok_and(|v| v.is_parameter()));
            let Some(Some(out)) = next_op.outputs().first().copied() else { break };
            if !commutes || !constant_rest {
                break;
            }
            relays.push(kind.to_string());
            current = out;
        }
    }
    pairs
}

/// The channel axis of a Conv/Gemm output (1), for statistics; MatMul outputs have theirs last
/// and are not measured here.
fn output_channel_axis(graph: &Graph, op: OpId) -> Option<usize> {
    match op_roles(graph.operation(op).ok()?).activation_channel_axis()? {
        ChannelAxis::At(axis) => Some(axis),
        ChannelAxis::Last | ChannelAxis::BeforeLast => None,
    }
}

/// The pass.
#[derive(Default)]
pub struct Equalization {
    pub setting: EqualizationSetting,
}

/// A pair's weights as the pass works on them.
struct Working {
    pair: Pair,
    /// B's input-channel layout.
    down_channels: InputChannels,
    /// The cumulative scale of each channel.
    scale: Vec<f32>,
}

/// The DFQ scale of each channel, √(r2/r1), kept in [1/max_scale, max_scale]; 1 where either
/// range is zero. Output channel c of the first op times it makes both ranges √(r1·r2).
pub(crate) fn dfq_scales(r1: &[f32], r2: &[f32], max_scale: f32) -> Vec<f32> {
    r1.iter()
        .zip(r2)
        .map(|(a, b)| if *a > 0.0 && *b > 0.0 { (b / a).sqrt().clamp(1.0 / max_scale, max_scale) } else { 1.0 })
        .collect()
}

impl Equalization {
    fn needs_statistics(&self) -> bool {
        self.setting.including_act || self.setting.absorb_high_bias
    }
}

impl Pass for Equalization {
    fn name(&self) -> &'static str {
        "equalization"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn statistics(&self, graph: &Graph) -> Result<Vec<StatRequest>> {
        if !self.needs_statistics() {
            return Ok(Vec::new());
        }
        let mut requests = Vec::new();
        for pair in find_pairs(graph, self.setting.clip_as_relu) {
            if let Some(axis) = output_channel_axis(graph, pair.up) {
                let statistic = Statistic::ChannelRange { axis };
                requests.push(StatRequest::new(pair.up_output, statistic, GraphMode::Float));
                if pair.down_input != pair.up_output && self.setting.including_act {
                    let axis = if pair.relays.iter().any(|r| r == "Flatten") { 1 } else { axis };
                    let statistic = Statistic::ChannelRange { axis };
                    requests.push(StatRequest::new(pair.down_input, statistic, GraphMode::Float));
                }
            }
        }
        Ok(requests)
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let name = self.name();
        let s = self.setting.clone();
        let graph: &Graph = ctx.graph;
        // Weights and biases of every operation in a pair, changed in memory, written at the end.
        let mut weights: HashMap<OpId, ParamView> = HashMap::new();
        let mut biases: HashMap<OpId, ParamView> = HashMap::new();
        let mut work = Vec::new();
        for pair in find_pairs(graph, s.clip_as_relu) {
            for op in [pair.up, pair.down] {
                if let std::collections::hash_map::Entry::Vacant(e) = weights.entry(op) {
                    let params = op_params(graph, op)?;
                    let Some(w) = params.weight else { continue };
                    e.insert(w);
                    if let Some(b) = params.bias.filter(|b| graph.consumers(b.var).len() == 1) {
                        biases.insert(op, b);
                    }
                }
            }
            let (Some(up_w), Some(down_w)) = (weights.get(&pair.up), weights.get(&pair.down)) else { continue };
            let Some(down_channels) = input_channels(graph, pair.down, down_w) else { continue };
            if up_w.channel_axis.is_none() || up_w.channels() != down_channels.count() {
                continue;
            }
            let channels = up_w.channels();
            work.push(Working { pair, down_channels, scale: vec![1.0; channels] });
        }
        let act_range = |w: &Working| -> Option<Vec<f32>> {
            let axis =
                if w.pair.relays.iter().any(|r| r == "Flatten") { 1 } else { output_channel_axis(graph, w.pair.up)? };
            let ranges = ctx.statistics.channel_ranges(w.pair.down_input, axis, GraphMode::Float)?;
            Some(ranges.iter().map(|(lo, hi)| lo.abs().max(hi.abs())).collect())
        };
        let act: Vec<Option<Vec<f32>>> =
            work.iter().map(|w| if s.including_act { act_range(w) } else { None }).collect();
        let mut rounds = 0;
        for _ in 0..s.iterations {
            rounds += 1;
            let mut moved = 0f32;
            for (k, w) in work.iter_mut().enumerate() {
                let up = &weights[&w.pair.up];
                let channels = up.channels();
                let mut r1 = up.channel_abs_max();
                if s.including_bias
                    && let Some(b) = biases.get(&w.pair.up)
                {
                    for (r, v) in r1.iter_mut().zip(&b.values) {
                        *r = r.max(v.abs() * s.bias_multiplier);
                    }
                }
                if let Some(a) = &act[k] {
                    for ((r, a), total) in r1.iter_mut().zip(a).zip(&w.scale) {
                        *r = r.max(a * total * s.act_multiplier);
                    }
                }
                let down = &weights[&w.pair.down];
                let r2 = down.abs_max_by(channels, |i| w.down_channels.channel_of(i));
                let factors = dfq_scales(&r1, &r2, s.max_scale);
                moved = factors.iter().fold(moved, |m, f| m.max(f.ln().abs()));
                let Some(up) = weights.get_mut(&w.pair.up) else { continue };
                up.scale_channels(&factors)?;
                if let Some(b) = biases.get_mut(&w.pair.up) {
                    b.scale_channels(&factors)?;
                }
                let Some(down) = weights.get_mut(&w.pair.down) else { continue };
                for (i, v) in down.values.iter_mut().enumerate() {
                    *v /= factors[w.down_channels.channel_of(i)];
                }
                for (t, f) in w.scale.iter_mut().zip(&factors) {
                    *t *= f;
                }
            }
            if moved < 1e-4 {
                break;
            }
        }
        let absorbed = if s.absorb_high_bias { absorb_high_bias(ctx, &work, &weights, &mut biases) } else { 0 };
        for view in weights.values().chain(biases.values()) {
            write_param(ctx.graph, view)?;
        }
        let relaxed = if s.clip_as_relu { remove_clip_bounds(ctx.graph, &work)? } else { 0 };
        let changed = work.iter().filter(|w| w.scale.iter().any(|s| (s - 1.0).abs() > 1e-6)).count();
        Ok(PassReport::new(
            name,
            changed + absorbed,
            format!(
                "{changed} of {} weighted pairs equalized in {rounds} rounds, high bias absorbed in {absorbed}, \
                 {relaxed} Clip upper bounds removed",
                work.len()
            ),
        ))
    }
}

/// High-bias absorption: where A → (Relu) → B and the pre-activation of channel c never falls
/// below h_c > 0 on the calibration data, A's bias loses h_c and B's bias gains W_B[:, c]·h_c
/// (Relu(x − h) = Relu(x) − h when x ≥ h). Only where B reads without padding, so the shift is
/// exact everywhere. Returns the number of pairs changed.
fn absorb_high_bias(
    ctx: &PassContext<'_>,
    work: &[Working],
    weights: &HashMap<OpId, ParamView>,
    biases: &mut HashMap<OpId, ParamView>,
) -> usize {
    let graph: &Graph = ctx.graph;
    let mut changed = 0;
    for w in work {
        let linear_or_relu = w.pair.relays.is_empty() || w.pair.relays == ["Relu"];
        let Some(down_op) = graph.operation(w.pair.down).ok() else { continue };
        let no_padding = match down_op.op_type.as_str() {
            "Gemm" => true,
            "Conv" => {
                let pads = down_op.attr_ints("pads").ok().flatten().unwrap_or_default();
                pads.iter().all(|p| *p == 0)
                    && down_op.attr_string("auto_pad", "NOTSET").is_ok_and(|a| a == "NOTSET" || a == "VALID")
            }
            _ => false,
        };
        let Some(axis) = output_channel_axis(graph, w.pair.up) else { continue };
        let Some(ranges) = ctx.statistics.channel_ranges(w.pair.up_output, axis, GraphMode::Float) else { continue };
        if !linear_or_relu || !no_padding || !biases.contains_key(&w.pair.up) || !biases.contains_key(&w.pair.down) {
            continue;
        }
        // The statistics were taken before the scaling: scale the minimum with the channel.
        let shift: Vec<f32> = ranges.iter().zip(&w.scale).map(|((lo, _), s)| (lo * s).max(0.0)).collect();
        if shift.iter().all(|h| *h == 0.0) {
            continue;
        }
        let down_w = &weights[&w.pair.down];
        let Some(down_b) = biases.get_mut(&w.pair.down) else { continue };
        let Some(out_axis) = down_w.channel_axis else { continue };
        if down_w.shape[out_axis] != down_b.values.len() {
            continue;
        }
        for (i, v) in down_w.values.iter().enumerate() {
            down_b.values[down_w.channel_of(i)] += v * shift[w.down_channels.channel_of(i)];
        }
        if let Some(up_b) = biases.get_mut(&w.pair.up) {
            for (b, h) in up_b.values.iter_mut().zip(&shift) {
                *b -= h;
            }
        }
        changed += 1;
    }
    changed
}

/// Removes the upper bound of every Clip between the pairs of `work` (`clip_as_relu`): the scaled
/// channels need per-channel bounds, which Clip cannot hold. Returns how many Clips changed.
fn remove_clip_bounds(graph: &mut Graph, work: &[Working]) -> Result<usize> {
    let mut clips = Vec::new();
    for w in work.iter().filter(|w| w.pair.relays.iter().any(|r| r == "Clip")) {
        let mut var = w.pair.up_output;
        while var != w.pair.down_input {
            let Some(next) = single_consumer(graph, var) else { break };
            let op = graph.operation(next).in_pass("equalization")?;
            if op.op_type == "Clip" {
                clips.push(next);
            }
            let Some(Some(out)) = op.outputs().first().copied() else { break };
            var = out;
        }
    }
    clips.sort();
    clips.dedup();
    for clip in &clips {
        if graph.operation(*clip).in_pass("equalization")?.inputs().len() > 2 {
            graph.set_op_input(*clip, 2, None).in_pass("equalization")?;
        }
        graph.operation_mut(*clip).in_pass("equalization")?.attributes.shift_remove("max");
    }
    Ok(clips.len())
}

/// Multiplies output channel c of `up` (weight and bias) by `factors[c]` and divides input
/// channel c of `down` by it, in `graph`: the float function of an equalizable pair is unchanged.
pub fn scale_pair(graph: &mut Graph, up: OpId, down: OpId, factors: &[f32]) -> Result<()> {
    let params = op_params(graph, up)?;
    if let Some(mut w) = params.weight {
        w.scale_channels(factors)?;
        write_param(graph, &w)?;
    }
    if let Some(mut b) = params.bias {
        b.scale_channels(factors)?;
        write_param(graph, &b)?;
    }
    if let Some(mut w) = op_params(graph, down)?.weight {
        let Some(channels) = input_channels(graph, down, &w) else { return Ok(()) };
        for (i, v) in w.values.iter_mut().enumerate() {
            *v /= factors[channels.channel_of(i)];
        }
        write_param(graph, &w)?;
    }
    Ok(())
}
