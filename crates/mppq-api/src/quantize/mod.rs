//! The quantization run, in the seeds' shape: [`load_quantizer`] (model + platform + setting) →
//! [`ModelQuantizer::quantize`] (fusion, dispatch, configs, the pass pipeline with calibration,
//! then If/Loop bodies and the accuracy budget) → [`ModelQuantizer::export_to`] (the exporters'
//! files). The one-call form is [`quantize_onnx_model`].
//!
//! Rooms: what is refused up front ([`admission`]), the run's [`setting`], quantization inside
//! control flow (`control_flow`), the accuracy [`budget`] and the command-line [`jobs`].

pub mod admission;
pub mod budget;
pub(crate) mod control_flow;
pub mod jobs;
pub mod reapply;
pub mod setting;

pub use admission::{check_model, ignored_scope};
pub use control_flow::count_quantized;
pub use jobs::{JobSummary, analyse_model, quantize_into, quantize_to_dir, run_analysis};
pub use reapply::apply_quant_config;

use crate::data::calib::CalibrationSet;
use crate::error::{ApiError, Result};
use crate::export::{Artifact, ExportOptions, Exporter, export_all, resolve_exporters};
use crate::platform::{Platform, operator_registry, platform_by_name};
use admission::{check_ignore_patterns, check_not_quantized, check_weights};
use jobs::analysis_progress;
use mppq_dispatch::{Dispatch, DispatchContext, dispatcher_by_name};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Value};
use mppq_export::ranges::ImportedValue;
use mppq_export::{ExportPreflight, ImportRanges};
use mppq_ir::Model;
use mppq_passes::configuration::per_tensor_below_opset13::PerTensorBelowOpset13;
use mppq_passes::{PassContext, PassReport, Pipeline, ProgressSink, StagePasses, run_pipeline};
use mppq_quant::quantizer::Quantizer;
use setting::QuantizeSetting;
use std::path::Path;
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
    pub budget: Option<crate::quantize::budget::BudgetReport>,
    /// The exporters [`Self::export_to`] runs, with their options (checked up front).
    exporters: Vec<(Arc<dyn Exporter>, ExportOptions)>,
    /// What converting a model older than opset 13 rewrote when it was loaded ([`crate::model::upgrade`]).
    pub opset_upgrade: Option<mppq_ir::morph::OpsetUpgrade>,
    /// Set when the model cannot reach opset 13: it is quantized below, per tensor.
    pub opset_cap: Option<crate::model::upgrade::OpsetCap>,
    /// The ranges of `setting.import_ranges`, read up front.
    imported: Option<(&'static str, Vec<ImportedValue>)>,
}

/// Reads `model_path` with the setting's platform and prepares its quantizer. Fails early on an
/// unknown platform, dispatcher or device, and on options the platform cannot honour.
pub fn load_quantizer(model_path: &Path, setting: QuantizeSetting) -> Result<ModelQuantizer> {
    setting.validate()?;
    let platform = platform_by_name(&setting.platform)?;
    let model = platform.parse(model_path, setting.weights.as_deref())?;
    admit_quantizer(model_path, platform, model, setting)
}

/// [`load_quantizer`] for a model already in memory (bytes given by a caller, say): the same
/// admission checks, with `source` naming it in errors.
pub fn quantizer_for_model(source: &Path, model: Model, setting: QuantizeSetting) -> Result<ModelQuantizer> {
    setting.validate()?;
    let platform = platform_by_name(&setting.platform)?;
    admit_quantizer(source, platform, model, setting)
}

fn admit_quantizer(
    source: &Path,
    platform: Arc<dyn Platform>,
    model: Model,
    setting: QuantizeSetting,
) -> Result<ModelQuantizer> {
    check_model(source, &model)?;
    check_not_quantized(source, &model)?;
    check_weights(source, &model)?;
    ModelQuantizer::new(platform, model, setting)
}

impl ModelQuantizer {
    /// Loads `model` for quantization on `platform`: converts it to opset 13 when it is older
    /// ([`crate::model::upgrade`]), checks the setting.
    /// Everything the platform and the setting decide is resolved here, once (quantizer, operators,
    /// device, exporters, imported ranges, process-wide limits); If/Loop bodies reuse it.
    pub fn new(platform: Arc<dyn Platform>, mut model: Model, setting: QuantizeSetting) -> Result<Self> {
        setting.validate()?;
        check_ignore_patterns(&model.graph, &setting.ignore)?;
        let plan = crate::model::upgrade::upgrade_for_quantization(&mut model)?;
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
        let exporters = resolve_exporters(
            setting.exporters.as_deref(),
            &setting.export,
            &platform.exporters(),
            &platform.export_options(),
        )?;
        if let Some(path) = setting.import_ranges.as_deref() {
            crate::staging::check_complete(path)?;
        }
        let imported = setting.import_ranges.as_deref().map(mppq_export::read_ranges).transpose()?;
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
    /// batch at a time); then the bodies of its If/Loop/Scan operations the same way, and the
    /// accuracy budget when one is set.
    pub fn quantize(&mut self, calib: &CalibrationSet, progress: &mut dyn ProgressSink) -> Result<()> {
        let run = GraphRun {
            setting: &self.setting,
            quantizer: &self.quantizer,
            dispatcher: self.dispatcher_name(),
            registry: &self.registry,
            device: &self.device,
            exporters: &self.exporters,
            imported: self.imported.as_ref(),
            opset_cap: self.opset_cap.as_ref(),
        };
        let outcome = run.quantize(&mut self.model, calib, progress)?;
        self.reports = outcome.reports;
        self.dispatch = outcome.dispatch;
        self.float_reference = outcome.float_reference;
        if self.setting.budget.is_set() {
            self.budget = Some(self.apply_budget(calib, progress)?);
        }
        Ok(())
    }

    /// The dispatcher the run uses: the setting's, else the platform's own.
    fn dispatcher_name(&self) -> String {
        self.setting.dispatcher.clone().unwrap_or_else(|| self.platform.dispatcher().to_string())
    }

    /// The dispatch [`Self::quantize`] will decide, without quantizing: the same structural
    /// passes and dispatcher on a copy of the model (`mppq dispatch`). The bodies of If/Loop
    /// operations are dispatched when they are quantized and are not shown.
    pub fn preview_dispatch(&self) -> Result<Dispatch> {
        let mut graph = self.model.graph.clone();
        let imports = self.model.opset_imports.clone();
        let opset = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let dispatcher = self.dispatcher_name();
        let dispatch = dispatch_step(self.quantizer.as_ref(), dispatcher, &self.setting.ignore);
        let mut passes = Pipeline::until_dispatch(&self.setting.pipeline, dispatch)?;
        let none: Vec<mppq_quant::Feeds> = Vec::new();
        let mut progress = mppq_passes::NoProgress;
        let mut ctx = PassContext::new(&mut graph, &self.registry, &self.device, &opset, &none, &mut progress);
        run_pipeline(&mut ctx, &mut passes)?;
        ctx.dispatch.take().ok_or_else(|| ApiError::Setting("the pipeline decided no dispatch".into()))
    }

    /// The accuracy budget of the setting (see [`crate::quantize::budget`]), on the calibration batches
    /// the analysis uses.
    fn apply_budget(
        &mut self,
        calib: &CalibrationSet,
        progress: &mut dyn ProgressSink,
    ) -> Result<crate::quantize::budget::BudgetReport> {
        let batches = &calib.first_values(self.setting.analysis.batches, &self.device)?;
        let opsets = |d: &str| self.model.opset(d).unwrap_or(0);
        let build = |g: &mppq_ir::Graph| Ok(Executor::new(g, &self.registry, &self.device, &opsets)?);
        let reference = match self.reference_executor()? {
            Some(e) => e,
            None => build(&self.model.graph)?,
        };
        let mut graph = self.model.graph.clone();
        let mut report_progress = analysis_progress(progress);
        let report = crate::quantize::budget::apply_budget(
            &mut graph,
            &build,
            &reference,
            batches,
            &self.setting.budget,
            &mut |d, t| report_progress("budget ranking", d, t),
        )?;
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
        Ok(export_all(&self.model, &self.exporters, dir)?)
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

/// One quantization of one model — the whole model, or an If/Loop body turned into a model of its
/// own — with what its [`ModelQuantizer`] resolved once.
struct GraphRun<'a> {
    setting: &'a QuantizeSetting,
    quantizer: &'a Arc<dyn Quantizer>,
    dispatcher: String,
    registry: &'a OpRegistry,
    device: &'a Device,
    exporters: &'a [(Arc<dyn Exporter>, ExportOptions)],
    imported: Option<&'a (&'static str, Vec<ImportedValue>)>,
    opset_cap: Option<&'a crate::model::upgrade::OpsetCap>,
}

/// What [`GraphRun::quantize`] leaves besides the quantized graph.
struct Outcome {
    reports: Vec<PassReport>,
    dispatch: Option<Dispatch>,
    float_reference: Option<mppq_ir::Graph>,
}

impl GraphRun<'_> {
    /// The passes this run adds at the pipeline's named stages.
    fn stage_passes(&self) -> StagePasses {
        let mut stages = StagePasses::default();
        if let Some(cap) = self.opset_cap {
            stages.after_configs.push(Box::new(PerTensorBelowOpset13 { reason: cap.to_string() }));
        }
        // What the exporters will refuse is refused once the configs exist, before calibration.
        stages.after_configs.push(Box::new(ExportPreflight { exporters: self.exporters.to_vec() }));
        if let (Some((format, values)), Some(file)) = (self.imported, &self.setting.import_ranges) {
            let import = ImportRanges { file: file.clone(), format, values: values.clone() };
            stages.after_calibration.push(Box::new(import));
        }
        stages
    }

    /// The pipeline on `model`, then the bodies of its control flow through this same function.
    fn quantize(&self, model: &mut Model, calib: &CalibrationSet, progress: &mut dyn ProgressSink) -> Result<Outcome> {
        // The passes borrow the graph mutably, so they read the opsets from a copy.
        let imports = model.opset_imports.clone();
        let opset = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let dispatch = dispatch_step(self.quantizer.as_ref(), self.dispatcher.clone(), &self.setting.ignore);
        let mut pipeline = self.setting.pipeline.clone();
        // An observer the user named is not second-guessed by the range search.
        if self.setting.quantizer.observer.is_some() || pipeline.calibration.observer.is_some() {
            pipeline.range_search.enabled = pipeline.range_search.enabled.or(Some(false));
        }
        let mut passes = Pipeline::full(&pipeline, dispatch, self.quantizer.clone(), self.stage_passes())?;
        let float_executor = || Ok(Executor::new(&model.graph, self.registry, self.device, &opset)?);
        let if_inputs = control_flow::capture_if_inputs(&model.graph, float_executor, self.device, calib)?;
        let float_executor = || Ok(Executor::new(&model.graph, self.registry, self.device, &opset)?);
        let loop_iterations = control_flow::capture_loop_iterations(&model.graph, float_executor, self.device, calib)?;
        let mut ctx = PassContext::new(&mut model.graph, self.registry, self.device, &opset, calib, progress);
        ctx.guard = self.setting.pipeline.guard_options();
        let mut reports = run_pipeline(&mut ctx, &mut passes)?;
        let (dispatch, float_reference) = (ctx.dispatch.take(), ctx.float_reference.take());
        drop(ctx);
        let mut quantize_body = |mut body: Model, calib: &CalibrationSet, progress: &mut dyn ProgressSink| {
            // Configs, reports and the quantization JSON name operations: each needs its own name.
            body.graph.name_operations();
            self.quantize(&mut body, calib, progress)?;
            Ok(body.graph)
        };
        reports.extend(control_flow::quantize_if_branches(model, if_inputs, &mut quantize_body, progress)?);
        reports.extend(control_flow::quantize_loop_bodies(model, loop_iterations, &mut quantize_body, progress)?);
        Ok(Outcome { reports, dispatch, float_reference })
    }
}

/// The pipeline's dispatch step: `dispatcher` deciding over the operation types `quantizer`
/// quantizes, with the setting's ignored scope.
fn dispatch_step(quantizer: &dyn Quantizer, dispatcher: String, ignore: &[String]) -> mppq_passes::Dispatch {
    let context = DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types())
        .with_ignored(ignored_scope(ignore));
    mppq_passes::Dispatch { dispatcher, context }
}
