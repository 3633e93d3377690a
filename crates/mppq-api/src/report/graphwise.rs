//! Graph-wise error: every watched tensor (quantized computing ops' outputs and the graph
//! outputs) compared between the float run and the full quantized simulation, errors
//! accumulated along the graph.
//!
//! Per batch: a float run whose hook keeps only the watched tensors (shared Burn buffers, no
//! copy), then a simulated run whose hook compares each watched tensor as soon as it is produced
//! and drops the float copy. Across batches only running sums and a capped sample per tensor
//! survive, so memory does not grow with the number of batches.

use super::stats::{Moments, PairSample};
use super::{AnalyseSetting, TensorStat, is_quantized, no_batches, op_label};
use crate::error::{ApiError, Result};
use mppq_exec::hooks::OpInfo;
use mppq_exec::{BurnFakeQuant, ExecHook, Executor, QuantSimulation, SimulationMemo, Tensor, Value};
use mppq_ir::{DataType, Graph, OpId};
use mppq_passes::structural::quant_fusion::fused_activation;
use std::collections::HashMap;

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

/// Float run: keeps the watched float tensors of the current batch.
struct KeepFloat<'a> {
    by_op: &'a HashMap<OpId, Vec<(usize, usize)>>,
    kept: Vec<Option<Tensor>>,
}

impl ExecHook for KeepFloat<'_> {
    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        for (slot, entry) in self.by_op.get(&op.id).into_iter().flatten() {
            if let Some(t) =
                outputs.get(*slot).and_then(|v| v.as_ref()).and_then(Value::as_tensor).filter(|t| is_float(t))
            {
                self.kept[*entry] = Some(t.clone());
            }
        }
        Ok(())
    }
}

/// Quantized run (after the simulation hook): compares each watched tensor with its float copy.
struct Compare<'a> {
    by_op: &'a HashMap<OpId, Vec<(usize, usize)>>,
    watches: &'a [Watch],
    kept: Vec<Option<Tensor>>,
    sums: &'a mut [Moments],
    samples: &'a mut [PairSample],
    batch: usize,
    /// The first problem met; hooks cannot return our error type, so it is reported after the run.
    error: Option<ApiError>,
}

impl Compare<'_> {
    fn compare(&mut self, entry: usize, q: &Tensor) -> Result<()> {
        let Some(fp) = self.kept[entry].take() else { return Ok(()) };
        let name = &self.watches[entry].tensor;
        let aligned = fp.shape() == q.shape();
        let (fp, q) = (fp.to_f32_vec(), q.to_f32_vec());
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

impl ExecHook for Compare<'_> {
    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        for (slot, entry) in self.by_op.get(&op.id).into_iter().flatten() {
            let Some(q) = outputs.get(*slot).and_then(|v| v.as_ref()).and_then(Value::as_tensor) else { continue };
            if let Err(e) = self.compare(*entry, q) {
                self.error = Some(e);
                break;
            }
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
    let mut by_op: HashMap<OpId, Vec<(usize, usize)>> = HashMap::new();
    for (entry, w) in watches.iter().enumerate() {
        by_op.entry(w.op).or_default().push((w.slot, entry));
    }
    let mut sums = vec![Moments::default(); watches.len()];
    let mut samples: Vec<PairSample> =
        (0..watches.len()).map(|i| PairSample::new(setting.sample_cap, setting.seed.wrapping_add(i as u64))).collect();
    let memo = SimulationMemo::new();
    for (b, batch) in batches.iter().enumerate() {
        let mut keep = KeepFloat { by_op: &by_op, kept: vec![None; watches.len()] };
        exec.run(batch.clone(), &mut [&mut keep])?;
        // Graph outputs are compared with the reference model's (internal tensors may be
        // rescaled by equalization: those are compared with this graph's own float run).
        if let Some(reference) = reference {
            let outputs = reference.run(batch.clone(), &mut [])?;
            for (entry, w) in watches.iter().enumerate().filter(|(_, w)| w.graph_output) {
                let value = outputs.iter().find(|(n, _)| *n == w.tensor).and_then(|(_, v)| v.as_tensor());
                keep.kept[entry] = value.filter(|t| is_float(t)).cloned();
            }
        }
        let mut sim = QuantSimulation::new(graph, BurnFakeQuant).with_memo(&memo);
        let mut compare = Compare {
            by_op: &by_op,
            watches: &watches,
            kept: keep.kept,
            sums: &mut sums,
            samples: &mut samples,
            batch: b,
            error: None,
        };
        // Order matters: the simulation quantizes an op's outputs before `compare` sees them.
        exec.run(batch.clone(), &mut [&mut sim, &mut compare])?;
        if let Some(e) = compare.error {
            return Err(e);
        }
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
