//! Layer-wise error: quantize one operation at a time (only its own configs applied, everything
//! else in float) and measure the graph outputs against the float run, ranking the layers by the
//! damage they do alone.
//!
//! Batches form the outer loop, so only one batch's float outputs are held at a time; each
//! layer keeps running sums over all batches.

use super::stats::Moments;
use super::{LayerStat, is_quantized, no_batches, op_label};
use crate::error::{ApiError, Result};
use mppq_exec::hooks::OpInfo;
use mppq_exec::{BurnFakeQuant, ExecHook, Executor, QuantSimulation, Value};
use mppq_ir::{Graph, OpId};
use mppq_passes::float_outputs;
use mppq_quant::padding::TokenPadding;

/// The operations layer-wise analysis quantizes one by one, in execution order: every op with a
/// config the simulation applies.
pub fn layers_to_analyse(graph: &Graph) -> Result<Vec<OpId>> {
    let mut ops = Vec::new();
    for id in graph.topological_order()? {
        if is_quantized(graph.operation(id)?) {
            ops.push(id);
        }
    }
    Ok(ops)
}

/// The full simulation, restricted to one operation's configs.
struct OnlyOp<'a> {
    target: OpId,
    sim: QuantSimulation<'a, BurnFakeQuant>,
}

impl ExecHook for OnlyOp<'_> {
    fn before_op(&mut self, op: &OpInfo<'_>, inputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        if op.id == self.target { self.sim.before_op(op, inputs) } else { Ok(()) }
    }

    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        if op.id == self.target { self.sim.after_op(op, outputs) } else { Ok(()) }
    }
}

/// Layer-wise error on `batches` against the outputs of `reference` (default: `exec` in float),
/// sorted by damage (lowest graph-output SNR first; ties by
/// name). `progress(done, total)` counts quantized runs: layers × batches.
pub fn layerwise_error(
    graph: &Graph,
    exec: &Executor,
    reference: Option<&Executor>,
    batches: &[Vec<(String, Value)>],
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<LayerStat>> {
    if batches.is_empty() {
        return Err(no_batches("layer-wise analysis"));
    }
    let layers = layers_to_analyse(graph)?;
    let mut sums = vec![Moments::default(); layers.len()];
    let total = layers.len() * batches.len();
    let mut done = 0;
    // Padding tokens are not compared (see `mppq_quant::padding`).
    let padding = TokenPadding::find(graph);
    for (b, batch) in batches.iter().enumerate() {
        let padding = padding.as_ref().and_then(|p| p.batch(batch));
        let mut reference = float_outputs(reference.unwrap_or(exec).run(batch.clone(), &mut [])?);
        if let Some(padding) = &padding {
            padding.blank(&mut reference);
        }
        for (name, fp) in &reference {
            if !Moments::of(fp, fp).is_finite() {
                return Err(ApiError::Analysis {
                    tensor: name.clone(),
                    message: format!("the float run produced NaN or infinity in batch {b}; check the input data"),
                });
            }
        }
        for (layer, sum) in layers.iter().zip(sums.iter_mut()) {
            let mut only = OnlyOp { target: *layer, sim: QuantSimulation::new(graph, BurnFakeQuant) };
            let mut quantized = float_outputs(exec.run(batch.clone(), &mut [&mut only])?);
            if let Some(padding) = &padding {
                padding.blank(&mut quantized);
            }
            for ((name, fp), (_, q)) in reference.iter().zip(&quantized) {
                let m = Moments::of(fp, q);
                if !m.is_finite() || fp.len() != q.len() {
                    let op = op_label(*layer, graph.operation(*layer)?);
                    return Err(ApiError::Analysis {
                        tensor: name.clone(),
                        message: format!(
                            "with only `{op}` quantized the output is NaN, infinite or resized in batch {b}; check that op's quantization parameters"
                        ),
                    });
                }
                sum.merge(&m);
            }
            done += 1;
            progress(done, total);
        }
    }
    let mut rows = Vec::with_capacity(layers.len());
    for (id, m) in layers.into_iter().zip(sums) {
        let op = graph.operation(id)?;
        rows.push(LayerStat {
            op: op_label(id, op),
            op_type: op.op_type.clone(),
            output: op.outputs().iter().flatten().next().map(|v| graph.var_name(*v).to_string()),
            snr_db: m.snr_db(),
            cosine: m.cosine(),
            mse: m.mse(),
        });
    }
    rows.sort_by(|a, b| a.snr_db.total_cmp(&b.snr_db).then_with(|| a.op.cmp(&b.op)));
    Ok(rows)
}
