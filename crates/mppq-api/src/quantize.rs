//! The quantization run, in the seeds' shape: [`load_quantizer`] (model + platform + setting) →
//! [`ModelQuantizer::quantize`] (fusion, dispatch, configs, the pass pipeline with calibration)
//! → [`ModelQuantizer::export`] (deployable model + quantization-parameter JSON). The one-call
//! form is [`quantize_onnx_model`].

use crate::calib::CalibrationSet;
use crate::error::{ApiError, Result};
use crate::export::{Artifact, ExportOptions, Exporter, export_all, resolve_exporters};
use crate::platform::{Platform, operator_registry, platform_by_name};
use crate::setting::QuantizeSetting;
use mppq_dispatch::{Dispatch, DispatchContext, IgnoredScope, dispatcher_by_name};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Value};
use mppq_ir::Model;
use mppq_passes::{PassContext, PassReport, Pipeline, ProgressSink, run_pipeline};
use mppq_quant::quantizer::Quantizer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A model being quantized for one platform.
pub struct ModelQuantizer {
    pub platform: Arc<dyn Platform>,
    pub model: Model,
    pub setting: QuantizeSetting,
    quantizer: Arc<dyn Quantizer>,
    registry: OpRegistry,
    device: Device,
    /// The dispatch decided by [`Self::quantize`] (per op precision and the reason).
    pub dispatch: Option<Dispatch>,
    /// What each pass did.
    pub reports: Vec<PassReport>,
    /// The float graph before the optimisation passes (see `PassContext::float_reference`): the
    /// graph outputs are measured against it. `None`: the model's own graph is the reference.
    pub float_reference: Option<mppq_ir::Graph>,
    /// What the accuracy budget gave back to float, when one was set.
    pub budget: Option<crate::budget::BudgetReport>,
    /// The exporters [`Self::export_to`] runs, with their options (checked up front).
    exporters: Vec<(Arc<dyn Exporter>, ExportOptions)>,
    /// What converting a model older than opset 13 rewrote when it was loaded ([`crate::upgrade`]).
    pub opset_upgrade: Option<mppq_ir::morph::OpsetUpgrade>,
    /// Set when the model cannot reach opset 13: it is quantized below, per tensor.
    pub opset_cap: Option<crate::upgrade::OpsetCap>,
    /// The ranges of `setting.import_ranges`, read up front.
    imported: Option<(&'static str, Vec<crate::export::table::ImportedValue>)>,
}

/// Reads `model_path` with the setting's platform and prepares its quantizer. Fails early on an
/// unknown platform, dispatcher or device, and on options the platform cannot honour.
pub fn load_quantizer(model_path: &Path, setting: QuantizeSetting) -> Result<ModelQuantizer> {
    let platform = platform_by_name(&setting.platform)?;
    let model = platform.parse(model_path, setting.weights.as_deref())?;
    check_model(model_path, &model)?;
    check_not_quantized(model_path, &model)?;
    check_weights(model_path, &model)?;
    ModelQuantizer::new(platform, model, setting)
}

/// Initializers must not hold NaN, weights and biases must be finite, BatchNormalization
/// variances non-negative: each fault used to surface as an observer that "observed NaN",
/// blaming the calibration data.
fn check_weights(path: &Path, model: &Model) -> Result<()> {
    let g = &model.graph;
    let user = |var| {
        g.consumers(var)
            .first()
            .and_then(|op| g.operation(*op).ok())
            .map(|op| format!(" (read by {} `{}`)", op.op_type, op.name))
            .unwrap_or_default()
    };
    // Infinity is a legitimate constant (Clip bounds, attention masks), but not as a weight or bias.
    let weighs = |var| {
        g.consumers(var).iter().filter_map(|op| g.operation(*op).ok()).any(|op| {
            let roles = mppq_ir::op_roles(op);
            let slots = roles.weight_slots().map(|(slot, ..)| slot).chain(roles.bias());
            slots.into_iter().any(|slot| op.inputs().get(slot).copied().flatten() == Some(var))
        })
    };
    for (id, var) in g.initializers() {
        let Some(value) = var.value.as_ref().filter(|v| v.dtype().is_float()) else { continue };
        let Ok(values) = value.to_f32_vec() else { continue };
        let bad = values
            .iter()
            .position(|v| v.is_nan())
            .or_else(|| values.iter().position(|v| v.is_infinite()).filter(|_| weighs(id)));
        if let Some(i) = bad {
            return Err(ApiError::data(
                path,
                format!(
                    "initializer `{}`{} holds {} at flat index {i}: the model's weights must be finite numbers",
                    var.name,
                    user(id),
                    values[i]
                ),
            ));
        }
    }
    for (_, op) in g.operations().filter(|(_, op)| op.op_type == "BatchNormalization") {
        let Some(var) = op.inputs().get(4).copied().flatten() else { continue };
        let Some(Ok(values)) = g.variable(var).ok().and_then(|v| v.value.as_ref()).map(|v| v.to_f32_vec()) else {
            continue;
        };
        if let Some(c) = values.iter().position(|v| *v < 0.0) {
            return Err(ApiError::data(
                path,
                format!(
                    "BatchNormalization `{}` has variance {} at channel {c}: a variance cannot be negative (the \
                     model's weights are damaged)",
                    op.name, values[c]
                ),
            ));
        }
    }
    Ok(())
}

/// Operators of an already quantized model (QDQ or QOperator format).
const QUANTIZED_OPS: &[&str] = &[
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeLinear",
];

/// Quantizing a quantized model again would stack a second rounding on the first (it used to
/// happen without a word): refused, naming what was found.
fn check_not_quantized(path: &Path, model: &Model) -> Result<()> {
    let found: Vec<&str> = model
        .graph
        .operations()
        .filter(|(_, op)| QUANTIZED_OPS.contains(&op.op_type.as_str()))
        .map(|(_, op)| op.op_type.as_str())
        .collect();
    if let Some(first) = found.first() {
        return Err(ApiError::data(
            path,
            format!(
                "is already quantized ({} quantization operators, e.g. {first}): give mppq the float model \
                 (`mppq run` runs this one as it is)",
                found.len()
            ),
        ));
    }
    Ok(())
}

/// Refuses what no quantization can be right for, before any work: a model from an ONNX newer
/// than this build knows (its operators may mean what this build cannot tell, and the export
/// would carry versions no runtime accepts: opset 99 used to be written back as 99), one that
/// declares no opset for its ONNX operators (it used to be read as opset 1 and "converted"),
/// and one without outputs (calibration then blamed an observer that saw nothing).
pub fn check_model(path: &Path, model: &Model) -> Result<()> {
    let (max_ir, max_opset) = (mppq_onnx::MAX_IR_VERSION, mppq_onnx::MAX_OPSET);
    if model.ir_version > max_ir {
        return Err(ApiError::data(
            path,
            format!(
                "IR version {} is newer than this build knows (≤ {max_ir}, ONNX 1.21): save the model with ONNX ≤ 1.21",
                model.ir_version
            ),
        ));
    }
    let uses_onnx_ops = model.graph.operations().any(|(_, op)| matches!(op.domain.as_str(), "" | "ai.onnx"));
    if uses_onnx_ops && model.opset("").is_none() {
        return Err(ApiError::data(
            path,
            "declares no opset for the ONNX domain (its opset_import lists none), so what its operators \
             mean is unknown: re-export it, or add the opset it was written for (onnx: \
             model.opset_import.append(onnx.helper.make_opsetid(\"\", N)))",
        ));
    }
    if model.graph.outputs().is_empty() {
        return Err(ApiError::data(path, "the graph has no outputs: there is nothing to compute or quantize"));
    }
    if let Some(opset) = model.opset("")
        && opset > max_opset
    {
        return Err(ApiError::data(
            path,
            format!(
                "opset {opset} is newer than this build knows (≤ {max_opset}): export the model at opset ≤ {max_opset}"
            ),
        ));
    }
    Ok(())
}

/// Every `--ignore` item must match an operation type or name of the model (or of a sub-graph):
/// a typo used to quantize everything without a word.
fn check_ignore_patterns(graph: &mppq_ir::Graph, items: &[String]) -> Result<()> {
    fn collect<'g>(g: &'g mppq_ir::Graph, out: &mut Vec<(&'g str, &'g str)>) {
        for (_, op) in g.operations() {
            out.push((op.op_type.as_str(), op.name.as_str()));
            for attr in op.attributes.values() {
                if let mppq_ir::Attribute::Graph(body) = attr {
                    collect(body, out);
                }
            }
        }
    }
    let mut ops = Vec::new();
    collect(graph, &mut ops);
    for item in items {
        let matches = ops.iter().any(|(t, n)| t == item || mppq_dispatch::context::glob_match(item, n));
        if !matches {
            let mut types: Vec<&str> = ops.iter().map(|(t, _)| *t).collect();
            types.sort_unstable();
            types.dedup();
            return Err(ApiError::Setting(format!(
                "ignore `{item}` matches no operation type or name of the model (`*` and `?` are the only \
                 wildcards; `mppq info` lists the names; types here: {})",
                types.join(", ")
            )));
        }
    }
    Ok(())
}

/// Turns a list of op types / name globs into an ignored scope: an item with glob characters or
/// dots is a name pattern, otherwise an operator type.
pub fn ignored_scope(items: &[String]) -> IgnoredScope {
    items.iter().fold(IgnoredScope::default(), |scope, item| {
        if item.contains(['*', '?', '.', '/']) { scope.with_name(item.clone()) } else { scope.with_type(item.clone()) }
    })
}

impl ModelQuantizer {
    /// Loads `model` for quantization on `platform`: converts it to opset 13 when it is older
    /// ([`crate::upgrade`]), checks the setting.
    pub fn new(platform: Arc<dyn Platform>, mut model: Model, setting: QuantizeSetting) -> Result<Self> {
        check_ignore_patterns(&model.graph, &setting.ignore)?;
        let plan = crate::upgrade::upgrade_for_quantization(&mut model)?;
        Self::at_opset(platform, model, setting, plan)
    }

    /// [`Self::new`] for a model already at the opset it is quantized at (`plan` says how it got
    /// there): the branches of an If are quantized at their model's opset.
    pub(crate) fn at_opset(
        platform: Arc<dyn Platform>,
        mut model: Model,
        setting: QuantizeSetting,
        plan: crate::upgrade::OpsetPlan,
    ) -> Result<Self> {
        if let Some(mib) = setting.max_tensor_mib {
            mppq_exec::budget::set_max_tensor_bytes(mib.saturating_mul(1 << 20));
        }
        if let Some(iterations) = setting.max_loop_iterations {
            mppq_exec::budget::set_max_loop_iterations(iterations);
        }
        let quantizer: Arc<dyn Quantizer> = platform.quantizer(&setting.quantizer)?.into();
        let dispatcher = setting.dispatcher.clone().unwrap_or_else(|| platform.dispatcher().to_string());
        dispatcher_by_name(&dispatcher)?;
        let device = setting.device.device()?;
        let registry = operator_registry(platform.as_ref());
        let exporters = resolve_exporters(&setting, &platform.exporters(), &platform.export_options())?;
        setting.budget.validate()?;
        setting.pipeline.validate()?;
        if setting.analysis.batches == Some(0) {
            // It used to be raised to 1 without a word.
            return Err(ApiError::Setting(
                "analysis.batches = 0: the analysis needs at least one batch (leave it out for 4)".into(),
            ));
        }
        let imported = setting.import_ranges.as_deref().map(crate::export::table::read_ranges).transpose()?;
        // Configs, reports and the quantization JSON name operations: each needs its own name.
        model.graph.name_operations();
        Ok(Self {
            platform,
            model,
            setting,
            quantizer,
            registry,
            device,
            dispatch: None,
            reports: Vec::new(),
            float_reference: None,
            budget: None,
            exporters,
            opset_upgrade: plan.upgrade,
            opset_cap: plan.cap,
            imported,
        })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn registry(&self) -> &OpRegistry {
        &self.registry
    }

    pub fn quantizer(&self) -> &dyn Quantizer {
        self.quantizer.as_ref()
    }

    /// An executor for the model as it is now (rebuild after the graph changed).
    pub fn executor(&self) -> Result<Executor> {
        let opsets = |d: &str| self.model.opset(d).unwrap_or(0);
        Ok(Executor::new(&self.model.graph, &self.registry, &self.device, &opsets)?)
    }

    /// An executor for the float model whose outputs the quantized one is measured against: the
    /// graph before the optimisation passes when they changed it (`None`: the model's own graph).
    pub fn reference_executor(&self) -> Result<Option<Executor>> {
        let opsets = |d: &str| self.model.opset(d).unwrap_or(0);
        let Some(graph) = self.float_reference.as_ref() else { return Ok(None) };
        // Passes that changed only quantization configs leave the float graph as it was: its
        // own float run is then the reference, and a second float run per batch would be waste.
        if graph.float_fingerprint() == self.model.graph.float_fingerprint() {
            return Ok(None);
        }
        Ok(Some(Executor::new(graph, &self.registry, &self.device, &opsets)?))
    }

    /// Quantizes the model with the one pass pipeline ([`Pipeline::full`]): graph fusion,
    /// dispatch, initial configs, then the passes, calibration included, over `calib` (read one
    /// batch at a time).
    pub fn quantize(&mut self, calib: &CalibrationSet, progress: &mut dyn ProgressSink) -> Result<()> {
        // The passes borrow the graph mutably, so they read the opsets from a copy.
        let imports = self.model.opset_imports.clone();
        let opset = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let dispatcher = self.setting.dispatcher.clone().unwrap_or_else(|| self.platform.dispatcher().to_string());
        let context = DispatchContext::new(self.quantizer.target_precision(), self.quantizer.quant_operation_types())
            .with_ignored(ignored_scope(&self.setting.ignore));
        let dispatch = mppq_passes::Dispatch { dispatcher, context };
        let mut pipeline = self.setting.pipeline.clone();
        // An observer the user named is not second-guessed by the range search.
        if self.setting.quantizer.observer.is_some() || pipeline.calibration.observer.is_some() {
            pipeline.range_search.enabled = pipeline.range_search.enabled.or(Some(false));
        }
        let mut passes = Pipeline::full(&pipeline, dispatch, self.quantizer.clone())?;
        // What the exporters will refuse is refused once the configs exist, before calibration.
        if let Some(at) = passes.iter().position(|p| p.name() == "init_quantization") {
            let preflight = crate::export::ExportPreflight { exporters: self.exporters.clone() };
            passes.insert(at + 1, Box::new(preflight));
            if let Some(cap) = &self.opset_cap {
                passes.insert(at + 1, Box::new(crate::upgrade::PerTensorBelowOpset13 { cap: cap.clone() }));
            }
        }
        if let (Some((format, values)), Some(file)) = (&self.imported, &self.setting.import_ranges)
            && let Some(at) = passes.iter().position(|p| p.name() == "runtime_calibration")
        {
            let import = crate::export::table::ImportRanges { file: file.clone(), format, values: values.clone() };
            passes.insert(at + 1, Box::new(import));
        }
        let if_inputs = crate::control_flow::capture_if_inputs(self, calib)?;
        let loop_iterations = crate::control_flow::capture_loop_iterations(self, calib)?;
        let mut ctx = PassContext::new(&mut self.model.graph, &self.registry, &self.device, &opset, calib, progress);
        ctx.guard = self.setting.pipeline.guard_options();
        self.reports = run_pipeline(&mut ctx, &mut passes)?;
        self.dispatch = ctx.dispatch.take();
        self.float_reference = ctx.float_reference.take();
        drop(ctx);
        let branches = crate::control_flow::quantize_if_branches(self, if_inputs, progress)?;
        self.reports.extend(branches);
        let bodies = crate::control_flow::quantize_loop_bodies(self, loop_iterations, progress)?;
        self.reports.extend(bodies);
        if self.setting.budget.is_set() {
            self.budget = Some(self.apply_budget(calib, progress)?);
        }
        Ok(())
    }

    /// The accuracy budget of the setting (see [`crate::budget`]), on the calibration batches
    /// the analysis uses.
    fn apply_budget(
        &mut self,
        calib: &CalibrationSet,
        progress: &mut dyn ProgressSink,
    ) -> Result<crate::budget::BudgetReport> {
        let batches = &calib.first_values(self.setting.analysis.batches, &self.device)?;
        let opsets = |d: &str| self.model.opset(d).unwrap_or(0);
        let build = |g: &mppq_ir::Graph| Ok(Executor::new(g, &self.registry, &self.device, &opsets)?);
        let reference = match self.reference_executor()? {
            Some(e) => e,
            None => build(&self.model.graph)?,
        };
        let mut graph = self.model.graph.clone();
        let mut report_progress = analysis_progress(progress);
        let report =
            crate::budget::apply_budget(&mut graph, &build, &reference, batches, &self.setting.budget, &mut |d, t| {
                report_progress("budget ranking", d, t)
            })?;
        self.model.graph = graph;
        Ok(report)
    }

    /// Runs one pass on the model without calibration data (a pass that reads none, such as
    /// `passive_parameter_quantize` after scales changed).
    pub fn run_pass(&mut self, pass: &mut dyn mppq_passes::Pass) -> Result<mppq_passes::PassReport> {
        let imports = self.model.opset_imports.clone();
        let opsets = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let none: Vec<mppq_quant::Feeds> = Vec::new();
        let mut progress = mppq_passes::NoProgress;
        let mut ctx =
            PassContext::new(&mut self.model.graph, &self.registry, &self.device, &opsets, &none, &mut progress);
        Ok(pass.run(&mut ctx)?)
    }

    /// Runs the quantized model (fake-quant simulation) on one batch.
    pub fn simulate(&self, feeds: Vec<(String, Value)>) -> Result<Vec<(String, Value)>> {
        let exec = self.executor()?;
        let mut sim = QuantSimulation::new(&self.model.graph, BurnFakeQuant);
        Ok(exec.run(feeds, &mut [&mut sim])?)
    }

    /// Runs the run's exporters (the platform's defaults, or those the setting names) into `dir`,
    /// created if missing; returns every file written.
    pub fn export_to(&self, dir: &Path) -> Result<Vec<Artifact>> {
        export_all(&self.model, &self.exporters, dir)
    }

    /// The exporters [`Self::export_to`] runs, by name.
    pub fn exporter_names(&self) -> Vec<&str> {
        self.exporters.iter().map(|(e, _)| e.name()).collect()
    }
}

/// The result of [`quantize_onnx_model`].
pub struct QuantizedModel {
    pub quantizer: ModelQuantizer,
    pub calibration: CalibrationSet,
}

/// One call: load `model_path`, read the calibration batches in `calib_dir`, quantize with
/// `setting`. Export with `result.quantizer.export_to(dir)`.
pub fn quantize_onnx_model(model_path: &Path, calib_dir: &Path, setting: QuantizeSetting) -> Result<QuantizedModel> {
    let mut quantizer = load_quantizer(model_path, setting)?;
    let calibration = open_calibration(&quantizer, calib_dir, &mut mppq_passes::NoProgress)?;
    quantizer.quantize(&calibration, &mut mppq_passes::NoProgress)?;
    Ok(QuantizedModel { quantizer, calibration })
}

/// The calibration data at `path`, read as the quantizer's setting says (`[data]`, and
/// `pipeline.calibration.steps` batches at most).
pub fn open_calibration(q: &ModelQuantizer, path: &Path, progress: &mut dyn ProgressSink) -> Result<CalibrationSet> {
    CalibrationSet::open(&q.model, path, &q.setting.data, q.setting.pipeline.calibration.steps, progress)
}

/// What a `quantize`/`analyse` run did, for printing.
pub struct JobSummary {
    pub model: String,
    pub platform: String,
    /// Operations quantized, out of all operations.
    pub quantized_ops: (usize, usize),
    pub dispatch: Option<Dispatch>,
    /// One line per pass.
    pub pass_reports: Vec<String>,
    pub analysis: Option<crate::analyse::AnalysisReport>,
    /// What the accuracy budget gave back, when one was set.
    pub budget: Option<crate::budget::BudgetReport>,
    /// (what, path) of every file written.
    pub files: Vec<(String, PathBuf)>,
    pub seconds: f64,
    /// The opset conversion done when the model was loaded, if any.
    pub opset_upgrade: Option<mppq_ir::morph::OpsetUpgrade>,
    /// Set when the model cannot reach opset 13: it is quantized below, per tensor.
    pub opset_cap: Option<crate::upgrade::OpsetCap>,
    /// What reading the calibration data decided (a partial batch dropped, batches streamed).
    pub data_notes: Vec<String>,
}

impl JobSummary {
    /// One line: what was quantized, for which platform, the graph outputs' SNR and the time.
    pub fn summary_line(&self) -> String {
        let snr = self
            .analysis
            .as_ref()
            .map(|a| a.outputs().map(|t| format!("{} {:.2} dB", t.tensor, t.snr_db)).collect::<Vec<_>>().join(", "))
            .filter(|s| !s.is_empty())
            .map(|s| format!("; output SNR vs float: {s}"))
            .unwrap_or_default();
        format!(
            "{}: {} of {} operations quantized for platform `{}`{snr}; {:.3} s",
            self.model, self.quantized_ops.0, self.quantized_ops.1, self.platform, self.seconds
        )
    }
}

/// Bridges the analysis' `(stage, done, total)` callback to a progress sink.
fn analysis_progress(progress: &mut dyn ProgressSink) -> impl FnMut(&str, usize, usize) + '_ {
    let (mut current, mut reported) = (String::new(), 0usize);
    move |stage, done, total| {
        if stage != current {
            if !current.is_empty() {
                progress.finish();
            }
            current = stage.to_string();
            reported = 0;
            progress.begin(&format!("analysis: {stage}"), total as u64);
        }
        progress.advance(done.saturating_sub(reported) as u64);
        reported = done;
        if done == total {
            progress.finish();
            current.clear();
        }
    }
}

/// The graph-wise (and, on request, layer-wise) analysis of a quantized model on the first
/// `analysis.batches` batches of `calib`: what `quantize_to_dir` writes as the report.
pub fn run_analysis(
    q: &ModelQuantizer,
    calib: &CalibrationSet,
    progress: &mut dyn ProgressSink,
) -> Result<crate::analyse::AnalysisReport> {
    let exec = q.executor()?;
    let reference = q.reference_executor()?;
    let batches = calib.first_values(q.setting.analysis.batches, &q.device)?;
    let name = q.model.graph.name.clone();
    let mut report = crate::analyse::analyse(
        &name,
        &q.model.graph,
        &exec,
        reference.as_ref(),
        &batches,
        &q.setting.analysis,
        analysis_progress(progress),
    )?;
    report.passes = q
        .reports
        .iter()
        .map(|r| crate::analyse::PassTime { pass: r.pass.to_string(), summary: r.summary.clone(), seconds: r.seconds })
        .collect();
    Ok(report)
}

fn summary(
    q: &ModelQuantizer,
    calib: &CalibrationSet,
    analysis: Option<crate::analyse::AnalysisReport>,
    files: Vec<(String, PathBuf)>,
    started: std::time::Instant,
) -> JobSummary {
    let graph = &q.model.graph;
    JobSummary {
        model: graph.name.clone(),
        platform: q.platform.name().to_string(),
        quantized_ops: crate::control_flow::count_quantized(graph),
        dispatch: q.dispatch.clone(),
        pass_reports: q.reports.iter().map(|r| r.to_string()).collect(),
        analysis,
        budget: q.budget.clone(),
        files,
        seconds: started.elapsed().as_secs_f64(),
        opset_upgrade: q.opset_upgrade.clone(),
        opset_cap: q.opset_cap.clone(),
        data_notes: calib.notes().to_vec(),
    }
}

/// Writes `dir/report.html` and `dir/report.json` (creating `dir`); returns them for listing.
fn write_reports(analysis: &crate::analyse::AnalysisReport, dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(dir).map_err(|source| ApiError::Io { path: dir.display().to_string(), source })?;
    let (html, json) = (dir.join("report.html"), dir.join("report.json"));
    crate::analyse::write_html(analysis, None, &html)?;
    analysis.write_json(&json)?;
    Ok(vec![("report".into(), html), ("report data".into(), json)])
}

/// `mppq quantize`: quantize `model_path` on the batches in `calib_dir`, run the exporters into
/// `out_dir` (by default `model.qdq.onnx`, `quant.json` and `model.float.onnx`, the float graph
/// after fusions), and write the graph-wise analysis as `out_dir/report.html` and
/// `out_dir/report.json`. The files appear together once all is done, and never replace an
/// input ([`crate::staging`]).
pub fn quantize_to_dir(
    model_path: &Path,
    calib_dir: &Path,
    setting: QuantizeSetting,
    out_dir: &Path,
    progress: &mut dyn ProgressSink,
) -> Result<JobSummary> {
    let started = std::time::Instant::now();
    let (imported, weights) = (setting.import_ranges.clone(), setting.weights.clone());
    let inputs: Vec<&Path> =
        [model_path, calib_dir].into_iter().chain(imported.as_deref()).chain(weights.as_deref()).collect();
    let staging = crate::staging::Staging::new(out_dir, &inputs)?;
    let mut q = load_quantizer(model_path, setting)?;
    let calib = open_calibration(&q, calib_dir, progress)?;
    q.quantize(&calib, progress)?;
    let mut files: Vec<(String, PathBuf)> =
        q.export_to(staging.path())?.into_iter().map(|a| (a.what, a.path)).collect();
    let analysis = run_analysis(&q, &calib, progress)?;
    files.extend(write_reports(&analysis, staging.path())?);
    let files = staging.commit(files)?;
    Ok(summary(&q, &calib, Some(analysis), files, started))
}

/// `mppq analyse`: quantize in memory (or apply `quant_config`), then analyse; with `out_dir`,
/// write `report.html` and `report.json` there.
pub fn analyse_model(
    model_path: &Path,
    calib_dir: &Path,
    setting: QuantizeSetting,
    quant_config: Option<&Path>,
    out_dir: Option<&Path>,
    progress: &mut dyn ProgressSink,
) -> Result<JobSummary> {
    let started = std::time::Instant::now();
    let staging = out_dir.map(|dir| crate::staging::Staging::new(dir, &[model_path, calib_dir])).transpose()?;
    let mut q = load_quantizer(model_path, setting)?;
    let calib = open_calibration(&q, calib_dir, progress)?;
    match quant_config {
        Some(path) => crate::export::apply_quant_config(&mut q.model, path, &q.setting.pipeline)?,
        None => q.quantize(&calib, progress)?,
    }
    let analysis = run_analysis(&q, &calib, progress)?;
    let files = match staging {
        Some(staging) => {
            let files = write_reports(&analysis, staging.path())?;
            staging.commit(files)?
        }
        None => Vec::new(),
    };
    Ok(summary(&q, &calib, Some(analysis), files, started))
}
