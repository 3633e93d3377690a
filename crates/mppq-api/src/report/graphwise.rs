//! Graph-wise error: every watched tensor (quantized computing ops' outputs and the graph
//! outputs) compared between the float run and the full quantized simulation, errors
//! accumulated along the graph.
//!
//! The runs are the comparison engine's (`mppq_passes::runtime::compare::Comparison`): per
//! batch, a float run keeps only the watched tensors (shared Burn buffers, no copy), then the
//! simulated run compares each watched tensor as soon as it is produced and drops the float copy.
//! This module adds what is the report's: which tensors are watched, the graph outputs taken from
//! the reference model, and per tensor the [`Moments`] and a capped sample for histograms. Across
//! batches only those survive, so memory does not grow with the number of batches.

use super::stats::{Moments, PairSample};
use super::{AnalyseSetting, TensorStat, is_quantized, no_batches, op_label};
use crate::error::{ApiError, Result};
use mppq_exec::{Executor, Tensor, Value};
use mppq_ir::quant::{ConfigSide, TargetPrecision};
use mppq_ir::{DataType, Graph, OpId};
use mppq_passes::runtime::compare::{Comparison, PairSink, TapPoints};
use mppq_passes::structural::quant_fusion::fused_activation;
use mppq_quant::padding::{BatchPadding, TokenPadding};

/// A tensor under watch: the op producing it and the output slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    pub op: OpId,
    pub slot: usize,
    pub tensor: String,
    pub graph_output: bool,
}

/// The tensors graph-wise analysis watches, in execution order: outputs of quantized computing
/// ops (of every quantized op with `all_quantized_ops`) and every graph output with a producer.
/// A computing op fused with its activation (`quant_fusion`) is watched at the activation's
/// output: the simulation computes the pair as one kernel, like the integer runtimes.
pub fn watched_tensors(graph: &Graph, all_quantized_ops: bool) -> Result<Vec<Watch>> {
    let mut watches: Vec<Watch> = Vec::new();
    for id in graph.topological_order()? {
        let op = graph.operation(id)?;
        let quantized = is_quantized(op) && (all_quantized_ops || mppq_dispatch::analysis::is_computing(op));
        let fused_into_activation = fused_activation(graph, id).is_some();
        for (slot, var) in op.outputs().iter().enumerate() {
            let Some(var) = var else { continue };
            let graph_output = graph.is_graph_output(*var);
            // A computing op fused with its activation is simulated as one kernel whose result
            // is the activation's: watch that, not the op's own (pre-activation) output.
            let watched_here = if fused_into_activation { graph_output } else { quantized || graph_output };
            if watched_here {
                watches.push(Watch { op: id, slot, tensor: graph.var_name(*var).to_string(), graph_output });
            }
            if fused_into_activation
                && quantized
                && let Some((act, out)) = fused_activation(graph, id)
            {
                let tensor = graph.var_name(out).to_string();
                if !watches.iter().any(|w| w.tensor == tensor) {
                    watches.push(Watch { op: act, slot: 0, tensor, graph_output: graph.is_graph_output(out) });
                }
            }
        }
    }
    // An activation watched for its producer is not watched again for itself.
    let mut seen = std::collections::HashSet::new();
    watches.retain(|w| seen.insert(w.tensor.clone()));
    Ok(watches)
}

fn is_float(t: &Tensor) -> bool {
    matches!(t.dtype(), DataType::Float | DataType::Double | DataType::Float16 | DataType::BFloat16)
}

/// The report's sink of the comparison engine: each watched tensor's [`Moments`] (the metrics)
/// and [`PairSample`] (the histograms).
struct Compare<'a> {
    watches: &'a [Watch],
    sums: &'a mut [Moments],
    samples: &'a mut [PairSample],
    batch: usize,
    /// This batch's padding tokens, left out of the graph outputs' figures.
    padding: Option<BatchPadding<'a>>,
}

impl PairSink for Compare<'_> {
    type Error = ApiError;

    fn pair(&mut self, entry: usize, fp: Option<Tensor>, q: &Tensor) -> Result<()> {
        let Some(fp) = fp else { return Ok(()) };
        let name = &self.watches[entry].tensor;
        let aligned = fp.shape() == q.shape();
        let (mut fp, mut q) = (fp.to_f32_vec(), q.to_f32_vec());
        if let Some(padding) = self.padding.as_ref().filter(|_| aligned && self.watches[entry].graph_output) {
            padding.blank_output(name, &mut fp);
            padding.blank_output(name, &mut q);
        }
        let m = if aligned { Moments::of(&fp, &q) } else { Moments::unaligned(&fp, &q) };
        if !m.is_finite() {
            let run = if fp.iter().any(|v| !v.is_finite()) { "float" } else { "quantized" };
            return Err(ApiError::Analysis {
                tensor: name.clone(),
                message: format!(
                    "the {run} run produced NaN or infinity in batch {}; check the input data and the quantization parameters",
                    self.batch
                ),
            });
        }
        self.sums[entry].merge(&m);
        if aligned {
            self.samples[entry].offer(&fp, &q);
        }
        Ok(())
    }
}

/// Graph-wise error on `batches` (each a list of (input name, value)): `graph` simulated with
/// `exec` against its own float run, and its outputs against those of `reference` when given
/// (the float model before optimisation passes changed it); `progress(done, total)`
/// counts batches. Rows come in execution order; tensors that are not float (or never produced)
/// are left out.
pub fn graphwise_error(
    graph: &Graph,
    exec: &Executor,
    reference: Option<&Executor>,
    batches: &[Vec<(String, Value)>],
    setting: &AnalyseSetting,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<TensorStat>> {
    if batches.is_empty() {
        return Err(no_batches("graph-wise analysis"));
    }
    let watches = watched_tensors(graph, setting.all_quantized_ops)?;
    let mut points = TapPoints::default();
    for (entry, w) in watches.iter().enumerate() {
        points.add((w.op, ConfigSide::Output, w.slot), entry);
    }
    let comparison = Comparison::new(graph, exec, points);
    // Padding tokens are not compared (see `mppq_quant::padding`).
    let padding = TokenPadding::find(graph);
    let weight_only = graph.operations().any(|(_, op)| op.precision == TargetPrecision::WeightOnly)
        && graph
            .operations()
            .all(|(_, op)| !op.precision.is_quantized() || op.precision == TargetPrecision::WeightOnly);
    let mut sums = vec![Moments::default(); watches.len()];
    let mut samples: Vec<PairSample> =
        (0..watches.len()).map(|i| PairSample::new(setting.sample_cap, setting.seed.wrapping_add(i as u64))).collect();
    for (b, batch) in batches.iter().enumerate() {
        let kept = match reference {
            // A weight-only graph's activations are never rescaled (no pass moves scale between
            // layers while activations stay float), so every tensor is compared with the
            // reference model's: a weight a pass rewrote (GPTQ's codes) counts against its layer.
            // (The reference is the graph cloned before the passes: the same operation ids.)
            Some(reference) if weight_only => {
                Comparison::keep(reference, comparison.points(), batch.clone(), is_float)?.0
            }
            // Graph outputs are compared with the reference model's (internal tensors may be
            // rescaled by equalization: those are compared with this graph's own float run).
            Some(reference) => {
                let (mut kept, _) = Comparison::keep(exec, comparison.points(), batch.clone(), is_float)?;
                let outputs = reference.run(batch.clone(), &mut [])?;
                for (entry, w) in watches.iter().enumerate().filter(|(_, w)| w.graph_output) {
                    let value = outputs.iter().find(|(n, _)| *n == w.tensor).and_then(|(_, v)| v.as_tensor());
                    kept[entry] = value.filter(|t| is_float(t)).cloned();
                }
                kept
            }
            None => Comparison::keep(exec, comparison.points(), batch.clone(), is_float)?.0,
        };
        let padding = padding.as_ref().and_then(|p| p.batch(batch));
        let mut compare = Compare { watches: &watches, sums: &mut sums, samples: &mut samples, batch: b, padding };
        comparison.simulate(batch.clone(), kept, &mut compare)??;
        progress(b + 1, batches.len());
    }
    let mut rows = Vec::with_capacity(watches.len());
    for ((w, m), sample) in watches.into_iter().zip(sums).zip(samples) {
        if m.count == 0 {
            continue;
        }
        let op = graph.operation(w.op)?;
        rows.push(TensorStat {
            tensor: w.tensor,
            op: op_label(w.op, op),
            op_type: op.op_type.clone(),
            graph_output: w.graph_output,
            snr_db: m.snr_db(),
            cosine: m.cosine(),
            mse: m.mse(),
            elements: m.count,
            sample,
        });
    }
    Ok(rows)
}
