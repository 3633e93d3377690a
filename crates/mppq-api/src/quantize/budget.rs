//! The accuracy budget: `--target-snr DB` and `--max-float-ops N`. After quantization, the
//! operations are ranked by the damage each does alone (the layer-wise analysis: one operation
//! quantized at a time), and the most damaging are given back to float, one at a time, until the
//! graph outputs' SNR on the calibration data reaches the target or N operations are in float.
//! An operation whose return to float does not raise the SNR is left quantized and skipped. Every
//! operation given back is reported with the SNR before and after. Works with every platform: an
//! operation goes back to float by setting its configs to `Fp32`, which every exporter honours.

use crate::error::{ApiError, Result};
use crate::report::{layers_to_analyse, layerwise_error};
use mppq_exec::{BurnFakeQuant, Executor, QuantSimulation, SimulationMemo, Value};
use mppq_ir::Graph;
use mppq_passes::float_outputs;
use mppq_quant::metrics::OutputNoise;
use mppq_quant::padding::TokenPadding;
use serde::{Deserialize, Serialize};

/// The `[budget]` section of the setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetSetting {
    /// Give operations back to float until the graph outputs' SNR reaches this (dB).
    pub target_snr: Option<f64>,
    /// Give back at most this many operations (alone: give back up to this many, each only
    /// where it raises the SNR).
    pub max_float_ops: Option<usize>,
}

impl BudgetSetting {
    pub fn is_set(&self) -> bool {
        self.target_snr.is_some() || self.max_float_ops.is_some()
    }

    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.target_snr.filter(|t| !t.is_finite()) {
            return Err(ApiError::Setting(format!("budget.target_snr = {t}: use a finite number of dB")));
        }
        Ok(())
    }
}

/// One operation given back to float.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GivenBack {
    pub op: String,
    pub op_type: String,
    /// Graph-output SNR (dB) before and after.
    pub snr_before_db: f64,
    pub snr_after_db: f64,
}

/// What the budget did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BudgetReport {
    pub target_snr_db: Option<f64>,
    pub max_float_ops: Option<usize>,
    pub start_db: f64,
    pub final_db: f64,
    pub given_back: Vec<GivenBack>,
    /// Whether the target SNR holds (true without a target).
    pub met: bool,
}

impl std::fmt::Display for BudgetReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = self.target_snr_db.map(|t| format!("target {t:.2} dB ")).unwrap_or_default();
        let verdict = if self.met { "met" } else { "NOT met" };
        write!(
            f,
            "accuracy budget ({target}{verdict}): output SNR {:.2} → {:.2} dB with {} operation(s) given back to float",
            self.start_db,
            self.final_db,
            self.given_back.len()
        )?;
        for g in &self.given_back {
            write!(f, "\n  {} ({}): {:.2} → {:.2} dB", g.op, g.op_type, g.snr_before_db, g.snr_after_db)?;
        }
        Ok(())
    }
}

/// The least signal energy an output counts with in [`output_snr`]: 1e-30 only keeps the
/// division finite, so a near-silent output still counts its relative error in full. The
/// pipeline's guard floors at 1e-12 instead; each keeps the floor it was written with, as
/// another one would change which operations the budget gives back on a model with a
/// (near-)silent output.
const BUDGET_SIGNAL_FLOOR: f64 = 1e-30;

/// Graph-output SNR of the simulated `graph` against `reference` outputs (their padding tokens
/// already blanked): −10·log10 of the mean noise-to-signal ratio of the outputs (as the
/// pipeline's guard measures it), padding tokens left out (`mppq_quant::padding`).
fn output_snr(
    graph: &Graph,
    exec: &Executor,
    batches: &[Vec<(String, Value)>],
    reference: &[mppq_passes::NamedOutputs],
    padding: Option<&TokenPadding>,
) -> Result<f64> {
    let mut sums = OutputNoise::default();
    let memo = SimulationMemo::new();
    for (batch, expected) in batches.iter().zip(reference) {
        let mut sim = QuantSimulation::new(graph, BurnFakeQuant).with_memo(&memo);
        let mut got = float_outputs(exec.run(batch.clone(), &mut [&mut sim])?);
        if let Some(padding) = padding.and_then(|p| p.batch(batch)) {
            padding.blank(&mut got);
        }
        sums.resize(expected.len());
        for (k, ((_, e), (_, g))) in expected.iter().zip(&got).enumerate() {
            sums.add(k, e, g);
        }
    }
    Ok(sums.mean_snr_db(BUDGET_SIGNAL_FLOOR))
}

/// Every config of `op` set to `Fp32` (its tensors, weights and biases stay float).
fn give_back(graph: &mut Graph, op: mppq_ir::OpId) -> Result<()> {
    graph.operation_mut(op)?.keep_in_float();
    Ok(())
}

/// Applies `setting` to the quantized `graph` (see the module doc); `exec` builds executors of a
/// graph, `reference` is the float model's executor, `batches` the calibration batches.
pub fn apply_budget(
    graph: &mut Graph,
    build: &dyn Fn(&Graph) -> Result<Executor>,
    reference: &Executor,
    batches: &[Vec<(String, Value)>],
    setting: &BudgetSetting,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<BudgetReport> {
    let padding = TokenPadding::find(graph);
    let mut expected: Vec<mppq_passes::NamedOutputs> = batches
        .iter()
        .map(|b| reference.run(b.clone(), &mut []).map(float_outputs))
        .collect::<std::result::Result<_, _>>()?;
    for (outputs, batch) in expected.iter_mut().zip(batches) {
        if let Some(padding) = padding.as_ref().and_then(|p| p.batch(batch)) {
            padding.blank(outputs);
        }
    }
    let exec = build(graph)?;
    let start = output_snr(graph, &exec, batches, &expected, padding.as_ref())?;
    let mut report = BudgetReport {
        target_snr_db: setting.target_snr,
        max_float_ops: setting.max_float_ops,
        start_db: start,
        final_db: start,
        given_back: Vec::new(),
        met: setting.target_snr.is_none_or(|t| start >= t),
    };
    if report.met && setting.target_snr.is_some() {
        return Ok(report);
    }
    let limit = setting.max_float_ops.unwrap_or(usize::MAX);
    // Rank by damage alone, most damaging first; labels map back to operation ids.
    let layers = layers_to_analyse(graph)?;
    let ranked = layerwise_error(graph, &exec, Some(reference), batches, &mut *progress)?;
    let by_label: std::collections::HashMap<String, mppq_ir::OpId> =
        layers.iter().filter_map(|id| Some((crate::report::op_label(*id, graph.operation(*id).ok()?), *id))).collect();
    let mut current = start;
    for row in ranked {
        if report.given_back.len() >= limit || setting.target_snr.is_some_and(|t| current >= t) {
            break;
        }
        let Some(id) = by_label.get(&row.op).copied() else { continue };
        let saved = graph.operation(id)?.clone();
        give_back(graph, id)?;
        let after = output_snr(graph, &build(graph)?, batches, &expected, padding.as_ref())?;
        if after > current {
            report.given_back.push(GivenBack {
                op: row.op.clone(),
                op_type: row.op_type.clone(),
                snr_before_db: current,
                snr_after_db: after,
            });
            current = after;
        } else {
            *graph.operation_mut(id)? = saved;
        }
    }
    report.final_db = current;
    report.met = setting.target_snr.is_none_or(|t| current >= t);
    Ok(report)
}
