//! `channel_split`: outlier channel splitting (Zhao et al., "Improving Neural Network
//! Quantization without Retraining using Outlier Channel Splitting", 2019; PPQ's
//! `ChannelwiseSplitPass`). In a pair that `equalization` finds (A → relays that commute with
//! a positive scale → B), the channels holding the largest weights are split in two: output
//! channel c of A is halved in place... precisely, scaled by 1/√2 and duplicated as a new last
//! channel, and input channel c of B likewise. Each copy contributes (w2/√2)·f((w1·x + b)/√2) =
//! ½·w2·f(w1·x + b), so the float model is unchanged, while the per-tensor ranges of both
//! weights shrink where the outliers were. The model grows by the split channels.
//!
//! Only ungrouped pairs (a depthwise B would need its groups rebuilt) whose relays are
//! channel-agnostic (no per-channel PRelu slope).

use crate::error::{InPass, Result};
use crate::optimisation::equalization::{Pair, find_pairs};
use crate::runtime::guard::Guard;
use crate::runtime::params::{InputChannels, ParamView, input_channels, max_over_median, op_params};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::{Graph, TensorData};
use serde::{Deserialize, Serialize};

/// The knobs of `channel_split` (settings section `channel_split`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelSplitSetting {
    /// On or off; absent: off at every level (it changes the model's shape).
    pub enabled: Option<bool>,
    /// Split at most this fraction of each pair's channels per round (at least one).
    pub ratio: f32,
    /// Rounds: a split channel can be split again (halving an outlier's range takes two).
    pub rounds: usize,
}

impl Default for ChannelSplitSetting {
    fn default() -> Self {
        Self { enabled: None, ratio: 0.05, rounds: 3 }
    }
}

#[derive(Default)]
pub struct ChannelSplit {
    pub setting: ChannelSplitSetting,
}

/// `values` of `shape` with `sources` (indices along `axis`) scaled by `factor` and appended
/// again along `axis`, scaled the same.
fn split_along(values: &[f32], shape: &[usize], axis: usize, sources: &[usize], factor: f32) -> (Vec<f32>, Vec<usize>) {
    let half = factor;
    let outer: usize = shape[..axis].iter().product();
    let (dim, inner): (usize, usize) = (shape[axis], shape[axis + 1..].iter().product());
    let mut out = Vec::with_capacity(values.len() + outer * sources.len() * inner);
    for o in 0..outer {
        let block = &values[o * dim * inner..(o + 1) * dim * inner];
        for c in 0..dim {
            let factor = if sources.contains(&c) { half } else { 1.0 };
            out.extend(block[c * inner..(c + 1) * inner].iter().map(|v| v * factor));
        }
        for c in sources {
            out.extend(block[c * inner..(c + 1) * inner].iter().map(|v| v * half));
        }
    }
    let mut new_shape = shape.to_vec();
    new_shape[axis] += sources.len();
    (out, new_shape)
}

fn write_split(graph: &mut Graph, view: &ParamView, axis: usize, sources: &[usize], factor: f32) -> Result<()> {
    let (values, shape) = split_along(&view.values, &view.shape, axis, sources, factor);
    let v = graph.variable_mut(view.var).in_pass("channel_split")?;
    let dtype = v.value.as_ref().map_or(mppq_ir::DataType::Float, |t| t.dtype());
    v.value = Some(TensorData::from_f32_as(dtype, shape, &values).in_pass("channel_split")?);
    Ok(())
}

/// Which weight a split halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Halved {
    /// A's output channels are halved and B's input channels duplicated (exact through
    /// positively homogeneous relays: 2·w2·f(w1·x/2) = w2·f(w1·x)).
    Up,
    /// A's output channels are duplicated and B's input channels halved (exact always).
    Down,
}

/// The channels to split: the largest channels of whichever weight is the more outlying (its
/// largest channel range over its median one), up to `ratio` of them, and which side is halved.
fn channels_to_split(
    up: &ParamView,
    down: &ParamView,
    down_channels: &InputChannels,
    ratio: f32,
) -> (Vec<usize>, Halved) {
    let n = up.channels();
    let (r1, r2) = (up.channel_abs_max(), down.abs_max_by(n, |i| down_channels.channel_of(i)));
    let (ranges, halved) =
        if max_over_median(&r1) >= max_over_median(&r2) { (&r1, Halved::Up) } else { (&r2, Halved::Down) };
    let mut order: Vec<usize> = (0..n).filter(|c| ranges[*c] > 0.0).collect();
    order.sort_by(|a, b| ranges[*b].total_cmp(&ranges[*a]));
    order.truncate(((n as f32 * ratio).floor() as usize).max(1));
    order.sort();
    (order, halved)
}

/// Whether the pair can be split: ungrouped weights, channel-agnostic relays.
fn splittable(graph: &Graph, pair: &Pair) -> bool {
    let group_one = |op| graph.operation(op).is_ok_and(|o| o.attr_int("group", 1).is_ok_and(|g| g == 1));
    group_one(pair.up) && group_one(pair.down) && !pair.relays.iter().any(|r| r == "PRelu")
}

impl Pass for ChannelSplit {
    fn name(&self) -> &'static str {
        "channel_split"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let name = self.name();
        let pairs: Vec<Pair> = find_pairs(ctx.graph, false).into_iter().filter(|p| splittable(ctx.graph, p)).collect();
        let mut split = 0;
        let mut pairs_split = std::collections::BTreeSet::new();
        for pair in pairs.iter().flat_map(|p| std::iter::repeat_n(p, self.setting.rounds)) {
            let (up, down) = (op_params(ctx.graph, pair.up)?, op_params(ctx.graph, pair.down)?);
            let (Some(up_w), Some(down_w)) = (up.weight, down.weight) else { continue };
            let Some(down_channels) = input_channels(ctx.graph, pair.down, &down_w) else { continue };
            let (Some(up_axis), InputChannels::Axis { axis: down_axis, .. }) = (up_w.channel_axis, &down_channels)
            else {
                continue;
            };
            if up_w.channels() != down_channels.count() {
                continue;
            }
            let (sources, halved) = channels_to_split(&up_w, &down_w, &down_channels, self.setting.ratio);
            if sources.is_empty() {
                continue;
            }
            let (up_factor, down_factor) = if halved == Halved::Up { (0.5, 1.0) } else { (1.0, 0.5) };
            write_split(ctx.graph, &up_w, up_axis, &sources, up_factor)?;
            if let Some(b) = up.bias {
                write_split(ctx.graph, &b, 0, &sources, up_factor)?;
            }
            write_split(ctx.graph, &down_w, *down_axis, &sources, down_factor)?;
            // The activations between A and B have more channels now: drop their recorded types.
            let mut var = pair.up_output;
            loop {
                ctx.graph.variable_mut(var).in_pass(name)?.ty = None;
                if var == pair.down_input {
                    break;
                }
                let Some(next) = ctx.graph.consumers(var).first().copied() else { break };
                let Some(Some(out)) = ctx.graph.operation(next).in_pass(name)?.outputs().first().copied() else {
                    break;
                };
                var = out;
            }
            split += sources.len();
            pairs_split.insert(pair.up.0);
        }
        Ok(PassReport::new(
            name,
            pairs_split.len(),
            format!(
                "{split} channels split in {} of {} splittable pairs ({} rounds)",
                pairs_split.len(),
                pairs.len(),
                self.setting.rounds
            ),
        ))
    }
}
