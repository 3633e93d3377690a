//! Quantization inside If branches. A model whose network sits in If branches (Silero VAD picks
//! its 16 kHz or 8 kHz network with an If) would otherwise stay float: the passes work on one
//! graph. Each branch the calibration data takes becomes a model of its own — the enclosing-scope
//! values it reads become its inputs, fed with what they held when the float model ran the
//! calibration batches — and is quantized with the same setting by the same pipeline (so nested
//! Ifs are handled the same way, one level down), then goes back into its If carrying its
//! configs. The simulation ([`mppq_exec::QuantSimulation`]) and the QDQ exporter follow the
//! configs into sub-graphs. A branch no calibration batch takes stays float, and the report
//! says so.
//!
//! Loop and Scan bodies are quantized the same way; their calibration batches are iterations:
//! one float run over the calibration data records what each body run starts from (its formal
//! inputs — iteration number, condition, loop-carried and scanned values — and the enclosing
//! values it reads), at most [`ITERATIONS_PER_RUN`] iterations per run of the loop, spread over
//! all of them.
//!
//! A body is quantized through a callback ([`QuantizeBody`]): the run that quantizes the model
//! hands in its own quantization of one model, so a body goes through the same pipeline, with
//! what the run resolved once (quantizer, operators, exporters), and nested control flow one level
//! down the same way.
//!
//! Memory: the captured values of every batch are held until the branches are quantized (about
//! one activation set per batch per If, and per recorded iteration per loop).

use crate::data::calib::CalibrationSet;
use crate::error::{ApiError, Result};
use mppq_exec::{Device, Executor, Value};
use mppq_ir::{Attribute, Graph, Model, TensorData};
use mppq_passes::{PassReport, ProgressSink};
use std::cell::RefCell;
use std::collections::HashMap;

/// Quantizes one body turned into a model of its own, on its calibration set; returns its
/// quantized graph.
pub(crate) type QuantizeBody<'a> = dyn FnMut(Model, &CalibrationSet, &mut dyn ProgressSink) -> Result<Graph> + 'a;

/// Loop iterations recorded per run of a loop (spread evenly over the run when it has more).
pub const ITERATIONS_PER_RUN: usize = 16;

/// What one top-level If read on each calibration batch: its condition and the values its
/// branches capture.
pub(crate) struct IfCapture {
    op: String,
    captured: Vec<String>,
    batches: Vec<(bool, Vec<(String, TensorData)>)>,
}

/// Runs the float model (`executor` builds it, only when needed) once per calibration batch up
/// to the inputs of all the If operations of `graph` (nothing when it has none).
pub(crate) fn capture_if_inputs(
    graph: &Graph,
    executor: impl FnOnce() -> Result<Executor>,
    device: &Device,
    calib: &CalibrationSet,
) -> Result<Vec<IfCapture>> {
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
    let exec = executor()?;
    for i in 0..calib.len() {
        let values: std::collections::HashMap<String, Value> =
            exec.run_until(calib.feeds(i, device)?, &wanted, &mut [])?.into_iter().collect();
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
        .ok_or_else(|| ApiError::Setting(format!("`{op}`: captured value `{name}` is not a tensor")))?;
    Ok(tensor.to_data()?)
}

/// Quantizes every branch of the captured If operations of `model` that a calibration batch
/// takes (with `quantize`), and puts it back. Returns one report line per If.
pub(crate) fn quantize_if_branches(
    model: &mut Model,
    captures: Vec<IfCapture>,
    quantize: &mut QuantizeBody<'_>,
    progress: &mut dyn ProgressSink,
) -> Result<Vec<PassReport>> {
    let mut reports = Vec::new();
    for capture in captures {
        let started = std::time::Instant::now();
        let Some(id) = model.graph.op_id(&capture.op) else { continue };
        let mut lines = Vec::new();
        let mut changed = 0;
        for (attr, when) in [("then_branch", true), ("else_branch", false)] {
            let batches: Vec<Vec<(String, TensorData)>> =
                capture.batches.iter().filter(|(taken, _)| *taken == when).map(|(_, b)| b.clone()).collect();
            let Some(Attribute::Graph(body)) = model.graph.operation(id)?.attr(attr) else { continue };
            if batches.is_empty() {
                lines.push(format!("{attr} taken by no calibration batch: float"));
                continue;
            }
            let body = (**body).clone();
            let label = format!("If `{}` {attr}", capture.op);
            let (quantized, count) =
                quantize_body(model, body, &capture.op, &label, &capture.captured, batches, quantize, progress)?;
            let (n, total) = count;
            lines.push(format!("{attr} {n} of {total} operations quantized"));
            changed += n;
            put_back(&mut model.graph, id, attr, quantized)?;
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
#[allow(clippy::too_many_arguments)]
fn quantize_body(
    outer_model: &Model,
    mut body: Graph,
    op: &str,
    label: &str,
    fed: &[String],
    batches: Vec<Vec<(String, TensorData)>>,
    quantize: &mut QuantizeBody<'_>,
    progress: &mut dyn ProgressSink,
) -> Result<(Graph, (usize, usize))> {
    // Captured constants (weights of the enclosing graph) come in as constants, so the branch's
    // passes see weights and can compute what is derived from them; the rest become inputs.
    let outer = &outer_model.graph;
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
    let wanted: Vec<&String> = fed.iter().filter(|n| body.var_id(n).is_some_and(|v| body.is_graph_input(v))).collect();
    let batches: Vec<Vec<(String, TensorData)>> =
        batches.into_iter().map(|b| b.into_iter().filter(|(n, _)| wanted.contains(&n)).collect()).collect();
    let model = Model { graph: body, ..sub_model(outer_model) };
    let calib = CalibrationSet::from_batches(&model, label, batches);
    let mut graph = quantize(model, &calib, progress)?;
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
            let base = format!("{name}_in_{op}");
            let fresh = mppq_ir::edit::unused_name(&base, |n| outer.var_id(n).is_some() || graph.var_id(n).is_some());
            graph.rename_variable(var, &fresh)?;
        }
    }
    let count = count_quantized(&graph);
    Ok((graph, count))
}

/// What one top-level Loop or Scan's body started from, per recorded iteration.
pub(crate) struct LoopCapture {
    op: String,
    op_type: String,
    /// The body's formal inputs and the enclosing values it reads.
    fed: Vec<String>,
    iterations: Vec<Vec<(String, TensorData)>>,
}

/// One recorded iteration: the values a body run started from, by name.
type Iteration = Vec<(String, Value)>;

/// Records body runs of the loops of one graph run, by loop name.
#[derive(Default)]
struct LoopRecorder {
    loops: HashMap<String, Vec<String>>,
    runs: RefCell<HashMap<String, Vec<Iteration>>>,
}

/// The hook inside one run of a loop: keeps every `stride`-th iteration, doubling the stride
/// whenever more than [`ITERATIONS_PER_RUN`] are kept.
struct BodyRecorder<'a> {
    names: &'a [String],
    kept: Vec<Iteration>,
    seen: usize,
    stride: usize,
    sink: &'a RefCell<HashMap<String, Vec<Iteration>>>,
    op: String,
}

impl mppq_exec::ExecHook for LoopRecorder {
    fn enter_subgraph(
        &self,
        op: &mppq_exec::hooks::OpInfo<'_>,
        attr: &str,
    ) -> Option<Box<dyn mppq_exec::ExecHook + '_>> {
        let names = self.loops.get(op.name).filter(|_| attr == "body")?;
        Some(Box::new(BodyRecorder {
            names,
            kept: Vec::new(),
            seen: 0,
            stride: 1,
            sink: &self.runs,
            op: op.name.to_string(),
        }))
    }
}

impl mppq_exec::ExecHook for BodyRecorder<'_> {
    fn subgraph_feeds(&mut self, feeds: &[(String, Value)], captured: &HashMap<String, Value>) {
        let index = self.seen;
        self.seen += 1;
        if !index.is_multiple_of(self.stride) {
            return;
        }
        let value = |n: &String| feeds.iter().find(|(f, _)| f == n).map(|(_, v)| v).or_else(|| captured.get(n));
        self.kept.push(self.names.iter().filter_map(|n| Some((n.clone(), value(n)?.clone()))).collect());
        if self.kept.len() > ITERATIONS_PER_RUN {
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
        }
    }
}

impl Drop for BodyRecorder<'_> {
    fn drop(&mut self) {
        self.sink.borrow_mut().entry(self.op.clone()).or_default().append(&mut self.kept);
    }
}

/// Runs the float model (`executor` builds it, only when needed) over the calibration data
/// recording the iterations of the top-level Loop and Scan operations of `graph` (nothing, and no
/// run, when it has none).
pub(crate) fn capture_loop_iterations(
    graph: &Graph,
    executor: impl FnOnce() -> Result<Executor>,
    device: &Device,
    calib: &CalibrationSet,
) -> Result<Vec<LoopCapture>> {
    let mut recorder = LoopRecorder::default();
    let mut captures = Vec::new();
    for (_, op) in graph.operations() {
        if !matches!(op.op_type.as_str(), "Loop" | "Scan") || !op.in_default_domain() {
            continue;
        }
        let Some(Attribute::Graph(body)) = op.attr("body") else { continue };
        let mut fed: Vec<String> = body.inputs().iter().map(|v| body.var_name(*v).to_string()).collect();
        for name in body.captured_names() {
            if !fed.contains(&name) {
                fed.push(name);
            }
        }
        recorder.loops.insert(op.name.clone(), fed.clone());
        captures.push(LoopCapture { op: op.name.clone(), op_type: op.op_type.clone(), fed, iterations: Vec::new() });
    }
    if captures.is_empty() {
        return Ok(captures);
    }
    let exec = executor()?;
    for i in 0..calib.len() {
        exec.run(calib.feeds(i, device)?, &mut [&mut recorder])?;
        let mut runs = recorder.runs.borrow_mut();
        for capture in &mut captures {
            for iteration in runs.remove(&capture.op).unwrap_or_default() {
                let data = iteration
                    .iter()
                    .map(|(n, v)| Ok((n.clone(), value_data(v, &capture.op, n)?)))
                    .collect::<Result<Vec<_>>>()?;
                capture.iterations.push(data);
            }
        }
    }
    Ok(captures)
}

/// Quantizes the body of every captured loop of `model` that ran at least once (with
/// `quantize`), and puts it back.
pub(crate) fn quantize_loop_bodies(
    model: &mut Model,
    captures: Vec<LoopCapture>,
    quantize: &mut QuantizeBody<'_>,
    progress: &mut dyn ProgressSink,
) -> Result<Vec<PassReport>> {
    let mut reports = Vec::new();
    for capture in captures {
        let started = std::time::Instant::now();
        let Some(id) = model.graph.op_id(&capture.op) else { continue };
        let label = format!("{} `{}` body", capture.op_type, capture.op);
        let Some(Attribute::Graph(body)) = model.graph.operation(id)?.attr("body") else { continue };
        let (summary, changed) = if capture.iterations.is_empty() {
            (format!("{label}: no iteration ran on the calibration data: float"), 0)
        } else {
            let iterations = capture.iterations.len();
            let body = (**body).clone();
            let (quantized, (n, total)) =
                quantize_body(model, body, &capture.op, &label, &capture.fed, capture.iterations, quantize, progress)?;
            put_back(&mut model.graph, id, "body", quantized)?;
            (format!("{label}: {n} of {total} operations quantized ({iterations} iterations recorded)"), n)
        };
        let mut report = PassReport::new("control_flow", changed, summary);
        report.seconds = started.elapsed().as_secs_f64();
        reports.push(report);
    }
    Ok(reports)
}

/// Puts a quantized sub-graph back into attribute `attr` of operation `id`.
fn put_back(graph: &mut Graph, id: mppq_ir::OpId, attr: &str, body: Graph) -> Result<()> {
    if let Some(Attribute::Graph(slot)) = graph.operation_mut(id)?.attributes.get_mut(attr) {
        **slot = body;
    }
    Ok(())
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
        counts.0 += usize::from(crate::report::is_quantized(op));
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
