//! Quantization inside If branches. A model whose network sits in If branches (Silero VAD picks
//! its 16 kHz or 8 kHz network with an If) would otherwise stay float: the passes work on one
//! graph. Each branch the calibration data takes becomes a model of its own — the enclosing-scope
//! values it reads become its inputs, fed with what they held when the float model ran the
//! calibration batches — and is quantized with the same setting by the same pipeline (so nested
//! Ifs are handled the same way, one level down), then goes back into its If carrying its
//! configs. The simulation ([`mppq_exec::QuantSimulation`]) and the QDQ exporter follow the
//! configs into sub-graphs. A branch no calibration batch takes stays float, and the report
//! says so. Loop and Scan bodies are not quantized yet (their inputs change per iteration).
//!
//! Memory: the captured values of every batch are held until the branches are quantized (about
//! one activation set per batch per If).

use crate::calib::CalibrationSet;
use crate::error::{ApiError, Result};
use crate::quantize::ModelQuantizer;
use mppq_exec::Value;
use mppq_ir::{Attribute, Graph, Model, TensorData};
use mppq_passes::{PassReport, ProgressSink};
use std::path::PathBuf;

/// What one top-level If read on each calibration batch: its condition and the values its
/// branches capture.
pub(crate) struct IfCapture {
    op: String,
    captured: Vec<String>,
    batches: Vec<(bool, Vec<(String, TensorData)>)>,
}

/// Runs the float model once per calibration batch up to the inputs of all its If operations
/// (nothing when it has none).
pub(crate) fn capture_if_inputs(q: &ModelQuantizer, calib: &CalibrationSet) -> Result<Vec<IfCapture>> {
    let graph = &q.model.graph;
    let (mut captures, mut conditions) = (Vec::new(), Vec::new());
    for (_, op) in graph.operations() {
        if op.op_type != "If" || !op.in_default_domain() {
            continue;
        }
        let Some(Some(cond)) = op.inputs().first().copied() else { continue };
        let mut captured: Vec<String> = Vec::new();
        for attr in ["then_branch", "else_branch"] {
            if let Some(Attribute::Graph(body)) = op.attr(attr) {
                for name in body.captured_names() {
                    if !captured.contains(&name) {
                        captured.push(name);
                    }
                }
            }
        }
        conditions.push(graph.var_name(cond).to_string());
        captures.push(IfCapture { op: op.name.clone(), captured, batches: Vec::with_capacity(calib.len()) });
    }
    if captures.is_empty() {
        return Ok(captures);
    }
    let mut wanted: Vec<String> = conditions.clone();
    for name in captures.iter().flat_map(|c| &c.captured) {
        if !wanted.contains(name) {
            wanted.push(name.clone());
        }
    }
    let exec = q.executor()?;
    for i in 0..calib.len() {
        let values: std::collections::HashMap<String, Value> =
            exec.run_until(calib.feeds(i, q.device())?, &wanted, &mut [])?.into_iter().collect();
        for (capture, cond) in captures.iter_mut().zip(&conditions) {
            // As the If kernel reads the condition: the first element, non-zero = then.
            let cond = values.get(cond).and_then(Value::as_tensor).map(|t| t.to_f64_vec()).unwrap_or_default();
            let taken = cond.first().is_some_and(|c| *c != 0.0);
            let mut feeds = Vec::with_capacity(capture.captured.len());
            for name in &capture.captured {
                if let Some(value) = values.get(name) {
                    feeds.push((name.clone(), value_data(value, &capture.op, name)?));
                }
            }
            capture.batches.push((taken, feeds));
        }
    }
    Ok(captures)
}

fn value_data(value: &Value, op: &str, name: &str) -> Result<TensorData> {
    let tensor = value
        .as_tensor()
        .ok_or_else(|| ApiError::Setting(format!("If `{op}`: captured value `{name}` is not a tensor")))?;
    Ok(tensor.to_data()?)
}

/// Quantizes every branch of the captured If operations of `q`'s model that a calibration batch
/// takes, and puts it back. Returns one report line per If.
pub(crate) fn quantize_if_branches(
    q: &mut ModelQuantizer,
    captures: Vec<IfCapture>,
    progress: &mut dyn ProgressSink,
) -> Result<Vec<PassReport>> {
    let mut reports = Vec::new();
    for capture in captures {
        let started = std::time::Instant::now();
        let Some(id) = q.model.graph.op_id(&capture.op) else { continue };
        let mut lines = Vec::new();
        let mut changed = 0;
        for (attr, when) in [("then_branch", true), ("else_branch", false)] {
            let batches: Vec<Vec<(String, TensorData)>> =
                capture.batches.iter().filter(|(taken, _)| *taken == when).map(|(_, b)| b.clone()).collect();
            let Some(Attribute::Graph(body)) = q.model.graph.operation(id)?.attr(attr) else { continue };
            if batches.is_empty() {
                lines.push(format!("{attr} taken by no calibration batch: float"));
                continue;
            }
            let body = (**body).clone();
            let (quantized, count) = quantize_branch(q, body, &capture, attr, batches, progress)?;
            let (n, total) = count;
            lines.push(format!("{attr} {n} of {total} operations quantized"));
            changed += n;
            if let Some(Attribute::Graph(slot)) = q.model.graph.operation_mut(id)?.attributes.get_mut(attr) {
                **slot = quantized;
            }
        }
        let mut report = PassReport::new("control_flow", changed, format!("If `{}`: {}", capture.op, lines.join("; ")));
        report.seconds = started.elapsed().as_secs_f64();
        reports.push(report);
    }
    Ok(reports)
}

/// One branch as a model of its own: captured names become inputs, quantized, then turned back.
/// A captured value the enclosing graph already quantizes is quantized again inside on the
/// branch's own grid (a second rounding; reusing the outer grid would need the branch's passive
/// bias scales recomputed).
fn quantize_branch(
    q: &ModelQuantizer,
    mut body: Graph,
    capture: &IfCapture,
    attr: &str,
    batches: Vec<Vec<(String, TensorData)>>,
    progress: &mut dyn ProgressSink,
) -> Result<(Graph, (usize, usize))> {
    // Captured constants (weights of the enclosing graph) come in as constants, so the branch's
    // passes see weights and can compute what is derived from them; the rest become inputs.
    let outer = &q.model.graph;
    let (mut promoted, mut copied) = (Vec::new(), Vec::new());
    for name in body.captured_names() {
        let var = body.ensure_variable(&name);
        let constant = outer.var_id(&name).and_then(|v| outer.variable(v).ok()?.value.clone());
        if let Some(value) = constant {
            body.variable_mut(var)?.value = Some(value);
            copied.push(name);
        } else if !body.is_graph_input(var) {
            body.add_graph_input(var)?;
            promoted.push(var);
        }
    }
    // Feed only what this branch reads.
    let wanted: Vec<&String> =
        capture.captured.iter().filter(|n| body.var_id(n).is_some_and(|v| body.is_graph_input(v))).collect();
    let batches: Vec<Vec<(String, TensorData)>> =
        batches.into_iter().map(|b| b.into_iter().filter(|(n, _)| wanted.contains(&n)).collect()).collect();
    let files = (0..batches.len())
        .map(|i| PathBuf::from(format!("<If `{}` {attr}, calibration batch {i}>", capture.op)))
        .collect();
    let calib = CalibrationSet { files, batches };
    let model = Model { graph: body, ..sub_model(&q.model) };
    let mut setting = q.setting.clone();
    // The budget and the analysis belong to the whole model.
    setting.budget = Default::default();
    let plan = crate::upgrade::OpsetPlan { upgrade: None, cap: q.opset_cap.clone() };
    let mut sub = ModelQuantizer::at_opset(q.platform.clone(), model, setting, plan)?;
    sub.quantize(&calib, progress)?;
    let mut graph = std::mem::take(&mut sub.model.graph);
    for var in promoted {
        graph.remove_graph_input(var)?;
    }
    // A copied constant still read here keeps a name of its own (a sub-graph must not shadow an
    // enclosing name); one the passes folded away is dropped.
    for name in copied {
        let Some(var) = graph.var_id(&name) else { continue };
        if graph.consumers(var).is_empty() && !graph.is_graph_output(var) {
            graph.remove_variable(var)?;
        } else {
            let base = format!("{name}_in_{}", capture.op);
            let fresh = mppq_ir::edit::unused_name(&base, |n| outer.var_id(n).is_some() || graph.var_id(n).is_some());
            graph.rename_variable(var, &fresh)?;
        }
    }
    let count = count_quantized(&graph);
    Ok((graph, count))
}

/// A model shell with `model`'s opsets and metadata, without its graph.
fn sub_model(model: &Model) -> Model {
    Model {
        ir_version: model.ir_version,
        opset_imports: model.opset_imports.clone(),
        functions: model.functions.clone(),
        ..Default::default()
    }
}

/// Operations quantized, out of all operations, sub-graphs included.
pub fn count_quantized(graph: &Graph) -> (usize, usize) {
    let mut counts = (0, 0);
    for (_, op) in graph.operations() {
        counts.0 += usize::from(crate::analyse::is_quantized(op));
        counts.1 += 1;
        for a in op.attributes.values() {
            if let Attribute::Graph(g) = a {
                let (n, total) = count_quantized(g);
                counts = (counts.0 + n, counts.1 + total);
            }
        }
    }
    counts
}
