//! `ssd_equalization`: search-based equalization (PPQ's `SSDEqualizationPass`). For every pair
//! `equalization` finds (the same relay matching, so pairs are found where PPQ's matching finds
//! none), several candidate channel scales are tried on the pair alone, each quantized and
//! calibrated on the pair's own cached inputs, and the one whose quantized output is closest to
//! the float pair is applied — only when its error is below `loss_threshold` × the error without
//! scaling. Candidates (PPQ's four): the DFQ scale √(r2/r1), and three that also weigh the
//! activation's channel ranges (min(k1, ka); the k1/k2 balance; √(ka·√(k1/k2)), with kx =
//! max(x)/x per channel of the weight and activation ranges floored at half their maximum).
//! Repeated `iterations` times. Costs a calibration of each pair per candidate, so it is not in
//! any `optimize` level: switch it on by name.

use crate::calibration::parameter_quantize::ParameterQuantize;
use crate::calibration::passive_parameter_quantize::PassiveParameterQuantize;
use crate::calibration::runtime_calibration::RuntimeCalibration;
use crate::error::{InPass, Result};
use crate::optimisation::equalization::{Pair, dfq_scales, find_pairs, scale_pair};
use crate::runtime::block::BlockRunner;
use crate::runtime::compare::{CompareTarget, compare_to_reference};
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::progress::NoProgress;
use crate::runtime::statistics::{GraphMode, StatRequest, Statistic};
use mppq_ir::{ChannelAxis, Graph, op_roles};
use serde::{Deserialize, Serialize};

/// The knobs of `ssd_equalization` (settings section `ssd_equalization`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsdEqualizationSetting {
    /// On or off; absent: off at every level.
    pub enabled: Option<bool>,
    /// Rounds over all pairs.
    pub iterations: usize,
    /// Apply the best candidate only when its error is below this fraction of the unscaled one.
    pub loss_threshold: f64,
}

impl Default for SsdEqualizationSetting {
    fn default() -> Self {
        Self { enabled: None, iterations: 3, loss_threshold: 0.8 }
    }
}

#[derive(Default)]
pub struct SsdEqualization {
    pub setting: SsdEqualizationSetting,
}

/// Per-channel largest |value| of a pair's up weight (by output channel) and down weight (by
/// input channel), from the graph.
fn weight_ranges(graph: &Graph, pair: &Pair) -> Result<Option<(Vec<f32>, Vec<f32>)>> {
    let (Some(up), Some(down)) = (crate::op_params(graph, pair.up)?.weight, crate::op_params(graph, pair.down)?.weight)
    else {
        return Ok(None);
    };
    let Some(channels) = crate::runtime::params::input_channels(graph, pair.down, &down) else { return Ok(None) };
    let n = up.channels();
    if channels.count() != n {
        return Ok(None);
    }
    Ok(Some((up.channel_abs_max(), down.abs_max_by(n, |i| channels.channel_of(i)))))
}

/// PPQ's four candidate scales (multiplying the up weight's output channels).
fn candidates(r1: &[f32], r2: &[f32], act: Option<&[f32]>) -> Vec<Vec<f32>> {
    let mut out = vec![dfq_scales(r1, r2, 10.0)];
    let Some(act) = act else { return out };
    let floor_half = |v: &[f32]| -> Vec<f32> {
        let max = v.iter().fold(0f32, |m, x| m.max(*x));
        v.iter().map(|x| x.max(0.5 * max).max(f32::MIN_POSITIVE)).collect()
    };
    let ratio = |v: &[f32]| -> Vec<f32> {
        let max = v.iter().fold(0f32, |m, x| m.max(*x));
        v.iter().map(|x| max / x).collect()
    };
    let (k1, k2) = (ratio(&floor_half(r1)), ratio(&floor_half(r2)));
    let act: Vec<f32> = act.iter().map(|a| a.max(0.01)).collect();
    let ka = ratio(&act);
    out.push(k1.iter().zip(&ka).map(|(a, b)| a.min(*b)).collect());
    let balance: Vec<f32> = k1.iter().zip(&ka).zip(&k2).map(|((a, b), c)| (a / c).min(b / c).min(8.0)).collect();
    let least = balance.iter().fold(f32::INFINITY, |m, x| m.min(*x)).max(f32::MIN_POSITIVE);
    out.push(balance.iter().map(|x| (x / least).clamp(1.0, 2.0)).collect());
    out.push(
        ka.iter().zip(k1.iter().zip(&k2)).map(|(a, (b, c))| (a * (b / c).sqrt()).sqrt().clamp(1.0, 2.0)).collect(),
    );
    out
}

/// The error of the pair quantized with output-channel `scales` applied, against the float pair,
/// both run from the cached pair inputs.
fn pair_loss(ctx: &PassContext<'_>, runner: &BlockRunner, pair: &Pair, output: &str, scales: &[f32]) -> Result<f64> {
    let name = "ssd_equalization";
    let reference = &runner.graph;
    let mut block = reference.clone();
    let (up, down) = (ctx.graph.operation(pair.up).in_pass(name)?, ctx.graph.operation(pair.down).in_pass(name)?);
    let (Some(up), Some(down)) = (block.op_id(&up.name), block.op_id(&down.name)) else { return Ok(f64::INFINITY) };
    scale_pair(&mut block, up, down, scales)?;
    let mut progress = NoProgress;
    let mut bctx = PassContext::new(&mut block, ctx.registry, ctx.device, ctx.opsets, runner, &mut progress);
    bctx.guard.enabled = false;
    let mut calibration: Vec<Box<dyn Pass>> = vec![
        Box::new(ParameterQuantize { options: Default::default() }),
        Box::new(RuntimeCalibration::default()),
        Box::new(PassiveParameterQuantize),
    ];
    crate::run_pipeline(&mut bctx, &mut calibration)?;
    let target = CompareTarget::seen(output);
    let stats = compare_to_reference(&mut bctx, name, reference, &[target], usize::MAX)?;
    Ok(stats.first().map_or(f64::INFINITY, |s| s.mean_square_error_total()))
}

impl Pass for SsdEqualization {
    fn name(&self) -> &'static str {
        "ssd_equalization"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn statistics(&self, graph: &Graph) -> Result<Vec<StatRequest>> {
        Ok(find_pairs(graph, false)
            .iter()
            .filter(|p| {
                graph.operation(p.up).is_ok_and(|o| op_roles(o).activation_channel_axis() == Some(ChannelAxis::At(1)))
            })
            .map(|p| StatRequest::new(p.up_output, Statistic::ChannelRange { axis: 1 }, GraphMode::Float))
            .collect())
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let name = self.name();
        let pairs = find_pairs(ctx.graph, false);
        let mut applied = 0;
        let mut changed_pairs = std::collections::BTreeSet::new();
        // The scale each pair's channels have taken so far (the statistics predate them).
        let mut applied_scales: std::collections::HashMap<mppq_ir::OpId, Vec<f32>> = Default::default();
        for _ in 0..self.setting.iterations {
            for pair in &pairs {
                let Some((r1, r2)) = weight_ranges(ctx.graph, pair)? else { continue };
                let up = ctx.graph.operation(pair.up).in_pass(name)?;
                let Some(Some(input)) = up.inputs().first().copied() else { continue };
                let Some(Some(output)) = ctx.graph.operation(pair.down).in_pass(name)?.outputs().first().copied()
                else {
                    continue;
                };
                let (input, output) = (ctx.graph.var_name(input).to_string(), ctx.graph.var_name(output).to_string());
                // The activation range per channel, scaled by what earlier rounds applied.
                let act: Option<Vec<f32>> = ctx
                    .statistics
                    .channel_ranges(pair.up_output, 1, GraphMode::Float)
                    .filter(|r| r.len() == r1.len())
                    .map(|r| {
                        let so_far = applied_scales.get(&pair.up);
                        r.iter().enumerate().map(|(c, (_, hi))| hi.max(0.0) * so_far.map_or(1.0, |s| s[c])).collect()
                    });
                let runner = BlockRunner::new(
                    ctx,
                    name,
                    &[&input],
                    &[&output],
                    GraphMode::Float,
                    BlockRunner::DEFAULT_CACHE_BYTES / 4,
                )?;
                let base = pair_loss(ctx, &runner, pair, &output, &vec![1.0; r1.len()])?;
                let mut best: Option<(f64, Vec<f32>)> = None;
                for scales in candidates(&r1, &r2, act.as_deref()) {
                    let loss = pair_loss(ctx, &runner, pair, &output, &scales)?;
                    if best.as_ref().is_none_or(|(b, _)| loss < *b) {
                        best = Some((loss, scales));
                    }
                }
                if let Some((_, scales)) = best.filter(|(loss, _)| *loss < self.setting.loss_threshold * base) {
                    scale_pair(ctx.graph, pair.up, pair.down, &scales)?;
                    let total = applied_scales.entry(pair.up).or_insert_with(|| vec![1.0; scales.len()]);
                    total.iter_mut().zip(&scales).for_each(|(t, s)| *t *= s);
                    applied += 1;
                    changed_pairs.insert(pair.up.0);
                }
            }
        }
        Ok(PassReport::new(
            name,
            changed_pairs.len(),
            format!(
                "{} of {} pairs rescaled ({applied} rescalings in {} rounds)",
                changed_pairs.len(),
                pairs.len(),
                self.setting.iterations
            ),
        ))
    }
}
