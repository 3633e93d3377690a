//! `bias_correction`: empirical bias correction (Nagel et al., 2019; PPQ's `BiasCorrectionPass`).
//! Quantized weights shift the mean of each output channel of a Conv/ConvTranspose/Gemm a little,
//! and the shifts add up through the network. The pass compares every such quantized operation's
//! output in the simulated graph with the float model on the calibration batches, subtracts the
//! per-channel mean error from the operation's bias, and repeats (`rounds`) so that later layers
//! see their producers corrected. A last comparison keeps each correction only where it lowered
//! that operation's output error; the others are undone.

use crate::error::Result;
use crate::runtime::compare::{CompareTarget, ErrorStats, compare_to_reference};
use crate::runtime::guard::Guard;
use crate::runtime::params::{ParamView, op_params, write_param};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::structural::quant_fusion::fused_activation;
use mppq_ir::quant::QuantizationState;
use mppq_ir::{Graph, OpClass, OpId, op_roles};
use serde::{Deserialize, Serialize};

/// The knobs of `bias_correction` (settings section `bias_correction`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BiasCorrectionSetting {
    /// On or off; absent: on from `optimize` level 2.
    pub enabled: Option<bool>,
    /// Correction rounds (each compares the whole graph once).
    pub rounds: usize,
    /// Compare on at most this many calibration batches.
    pub batches: usize,
}

impl Default for BiasCorrectionSetting {
    fn default() -> Self {
        Self { enabled: None, rounds: 2, batches: 32 }
    }
}

/// The pass.
#[derive(Default)]
pub struct BiasCorrection {
    pub setting: BiasCorrectionSetting,
}

/// A corrected operation's bias as it was, and as corrected.
struct Target {
    original: ParamView,
    bias: ParamView,
}

/// Quantized Conv/ConvTranspose/Gemm operations with a float bias initializer of their own and a
/// quantized weight (no weight error, nothing to correct), with the variable their error is
/// measured on: the output, or the output of the activation fused into the operation (the
/// simulation quantizes the pair's result once, after the activation).
fn find_targets(graph: &Graph) -> Vec<(OpId, ParamView, String)> {
    let mut out = Vec::new();
    for (id, op) in graph.operations() {
        // A weighted linear operation with a bias slot (Conv, ConvTranspose, Gemm).
        let roles = op_roles(op);
        if !roles.is(OpClass::WeightedLinear) || roles.bias().is_none() {
            continue;
        }
        let weight_quantized = op.quant_config.as_ref().and_then(|c| c.input_configs.get(1)).is_some_and(|c| {
            c.as_ref().is_some_and(|c| !matches!(c.state, QuantizationState::Fp32 | QuantizationState::Soi))
        });
        let Some(Some(output)) = op.outputs().first().copied() else { continue };
        let Ok(params) = op_params(graph, id) else { continue };
        let Some(bias) = params.bias.filter(|b| graph.consumers(b.var).len() == 1) else { continue };
        if weight_quantized {
            let measured = fused_activation(graph, id).map_or(output, |(_, out)| out);
            out.push((id, bias, graph.var_name(measured).to_string()));
        }
    }
    out
}

impl Pass for BiasCorrection {
    fn name(&self) -> &'static str {
        "bias_correction"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let name = self.name();
        let found = find_targets(ctx.graph);
        if found.is_empty() {
            return Ok(PassReport::new(name, 0, "no quantized Conv/ConvTranspose/Gemm with a bias"));
        }
        // The float model as it is now: the reference every round compares against.
        let reference = ctx.graph.clone();
        let compare: Vec<CompareTarget> =
            found.iter().map(|(_, _, output)| CompareTarget { name: output.clone(), channel_axis: Some(1) }).collect();
        let mut targets: Vec<Target> =
            found.into_iter().map(|(_, bias, _)| Target { original: bias.clone(), bias }).collect();
        let batches = self.setting.batches;
        let mut before: Option<Vec<ErrorStats>> = None;
        for _ in 0..self.setting.rounds.max(1) {
            let stats = compare_to_reference(ctx, name, &reference, &compare, batches)?;
            for (t, s) in targets.iter_mut().zip(&stats) {
                if s.mean_error.len() == t.bias.values.len() {
                    for (b, e) in t.bias.values.iter_mut().zip(&s.mean_error) {
                        *b -= *e as f32;
                    }
                    write_param(ctx.graph, &t.bias)?;
                }
            }
            before.get_or_insert(stats);
        }
        let after = compare_to_reference(ctx, name, &reference, &compare, batches)?;
        let before = before.unwrap_or_default();
        let mut kept = 0;
        for (k, t) in targets.iter().enumerate() {
            let (Some(b), Some(a)) = (before.get(k), after.get(k)) else { continue };
            if a.mean_square_error_total() < b.mean_square_error_total() {
                kept += 1;
            } else {
                write_param(ctx.graph, &t.original)?;
            }
        }
        Ok(PassReport::new(
            name,
            kept,
            format!("{kept} of {} biases corrected (kept where the operation's output error fell)", targets.len()),
        ))
    }
}
