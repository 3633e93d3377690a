//! Export: the home of every exporter. An [`Exporter`] writes one or more artifacts of a quantized
//! model (the QDQ ONNX model a runtime loads, a vendor's table, a parameter JSON) into an output
//! directory; exporters are registered by name like platforms ([`register_exporter`]), a
//! platform names its default ones ([`crate::Platform::exporters`]), and a run picks them with
//! `mppq quantize --export NAME` or `exporters = [...]` in the setting file, each with its options
//! in an `[export.NAME]` section. Everything is checked before calibration starts
//! ([`resolve_exporters`]).
//!
//! Built-ins, one file each: [`qdq`] (`model.qdq.onnx`), [`quant_json`] (`quant.json`),
//! [`float_onnx`] (`model.float.onnx`); the range tables of other toolchains, views of
//! [`table::rows`]: [`trt_calib_cache`], [`trt_dynamic_range`], [`ort_calib_cache`],
//! [`qnn_encodings`] (these also read back: [`table::read_ranges`]); per layer: [`ncnn_table`];
//! parameter JSONs: [`ppl_cuda_json`]. Adding one is one file plus one line in [`builtin`]
//! (see `docs/export.md`, "adding an exporter"). Files are written to a temporary name and
//! renamed: an existing file is only replaced by a complete one.
//!
//! Reading back: [`apply_quant_config`] puts a saved `quant.json` on a float model.

pub mod float_onnx;
pub mod ncnn_table;
pub mod ort_calib_cache;
pub mod ppl_cuda_json;
pub mod qdq;
pub mod qnn_encodings;
pub mod quant_json;
pub mod table;
pub mod trt_calib_cache;
pub mod trt_dynamic_range;

use crate::error::{ApiError, Result};
use crate::quantize::setting::QuantizeSetting;
use crate::registry::Registry;
use mppq_ir::Model;
use mppq_onnx::export::quant_json::{apply_quant_json, read_quant_json};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The options of one exporter: its `[export.NAME]` section, as read from the setting file.
pub type ExportOptions = serde_json::Value;

/// One file an exporter wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// What it is, for listings ("quantized model").
    pub what: String,
    pub path: PathBuf,
}

impl Artifact {
    pub fn new(what: impl Into<String>, path: PathBuf) -> Self {
        Self { what: what.into(), path }
    }
}

/// Writes what a target loads from a quantized model.
pub trait Exporter: Send + Sync {
    /// The name users pick it by (`--export NAME`, `[export.NAME]`).
    fn name(&self) -> &str;
    /// One line for `mppq exporters`.
    fn description(&self) -> &str;
    /// The options with their defaults, as its `[export.NAME]` section would hold them.
    fn default_options(&self) -> ExportOptions {
        ExportOptions::Object(Default::default())
    }
    /// Checks `options` before any long work; an unknown key is an error naming it.
    fn check_options(&self, options: &ExportOptions) -> Result<()>;
    /// Checks, before calibration, what the export will need of the model: `graph` has its
    /// dispatch and initial (uncalibrated) configs, `opset` is the model's default-domain opset.
    /// A model the export will refuse is refused here, before minutes of calibration. Nothing
    /// to check by default.
    fn preflight(&self, _graph: &mppq_ir::Graph, _opset: i64, _options: &ExportOptions) -> Result<()> {
        Ok(())
    }
    /// Writes the artifacts of `model` (calibrated configs on its operations) into `dir`, which
    /// exists, and returns them.
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>>;
}

/// A pass that runs every exporter's [`Exporter::preflight`] right after the configs are set,
/// before calibration.
pub(crate) struct ExportPreflight {
    pub exporters: Vec<(std::sync::Arc<dyn Exporter>, ExportOptions)>,
}

impl mppq_passes::Pass for ExportPreflight {
    fn name(&self) -> &'static str {
        "export_preflight"
    }

    fn run(&mut self, ctx: &mut mppq_passes::PassContext<'_>) -> mppq_passes::Result<mppq_passes::PassReport> {
        let opset = (ctx.opsets)("");
        for (exporter, options) in &self.exporters {
            exporter.preflight(ctx.graph, opset, options).map_err(|e| mppq_passes::PassError::Invalid {
                pass: "export_preflight",
                message: format!("exporter `{}`: {e}", exporter.name()),
            })?;
        }
        let names: Vec<&str> = self.exporters.iter().map(|(e, _)| e.name()).collect();
        Ok(mppq_passes::PassReport::new("export_preflight", 0, format!("checked for {}", names.join(", "))))
    }
}

/// Parses an exporter's options into its typed struct (missing keys take their defaults when
/// the struct says `#[serde(default)]`); errors name the section.
pub fn parse_options<T: DeserializeOwned>(exporter: &str, options: &ExportOptions) -> Result<T> {
    let options = if options.is_null() { ExportOptions::Object(Default::default()) } else { options.clone() };
    serde_json::from_value(options).map_err(|e| ApiError::Setting(format!("[export.{exporter}]: {e}")))
}

/// The options of an exporter that takes none: only an empty section (or none) is accepted.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

/// The exporters a platform runs unless told otherwise.
pub const DEFAULT_EXPORTERS: [&str; 3] = ["qdq", "quant-json", "float-onnx"];

/// Every built-in exporter.
fn builtin() -> Vec<(String, Arc<dyn Exporter>)> {
    let all: Vec<Arc<dyn Exporter>> = vec![
        Arc::new(qdq::Qdq),
        Arc::new(quant_json::QuantJson),
        Arc::new(float_onnx::FloatOnnx),
        Arc::new(ort_calib_cache::OrtCalibCache),
        Arc::new(trt_calib_cache::TrtCalibCache),
        Arc::new(trt_dynamic_range::TrtDynamicRange),
        Arc::new(qnn_encodings::QnnEncodings),
        Arc::new(ncnn_table::NcnnTable),
        Arc::new(ppl_cuda_json::PplCudaJson),
    ];
    all.into_iter().map(|e| (e.name().to_string(), e)).collect()
}

static EXPORTERS: Registry<dyn Exporter> = Registry::new("exporter", builtin);

/// Registers an exporter; a name already taken is an error.
pub fn register_exporter(exporter: Arc<dyn Exporter>) -> Result<()> {
    let name = exporter.name().to_string();
    EXPORTERS.register(&name, exporter)
}

/// The exporter called `name`; the error lists the known ones.
pub fn exporter_by_name(name: &str) -> Result<Arc<dyn Exporter>> {
    EXPORTERS.get(name)
}

/// Names of every registered exporter, sorted.
pub fn exporter_names() -> Vec<String> {
    EXPORTERS.names()
}

/// The exporters a run uses, each with its options: `setting.exporters` when given, else the
/// platform's defaults. An exporter's options are the platform's (`platform_options`, e.g. FP8
/// Q/DQ allowed) with the user's `[export.NAME]` keys over them. Every `[export.NAME]` section
/// must name an exporter of the run (options for an exporter that does not run would be silently
/// ignored), and every exporter checks its options here, before calibration.
pub fn resolve_exporters(
    setting: &QuantizeSetting,
    platform_defaults: &[String],
    platform_options: &std::collections::BTreeMap<String, ExportOptions>,
) -> Result<Vec<(Arc<dyn Exporter>, ExportOptions)>> {
    let names = setting.exporters.clone().unwrap_or_else(|| platform_defaults.to_vec());
    let mut out: Vec<(Arc<dyn Exporter>, ExportOptions)> = Vec::new();
    for name in &names {
        if out.iter().any(|(e, _)| e.name() == name) {
            continue;
        }
        let exporter = exporter_by_name(name)?;
        let options = match (platform_options.get(name), setting.export.get(name)) {
            (Some(ExportOptions::Object(base)), Some(ExportOptions::Object(user))) => {
                let mut merged = base.clone();
                merged.extend(user.clone());
                ExportOptions::Object(merged)
            }
            (_, Some(user)) => user.clone(),
            (Some(base), None) => base.clone(),
            (None, None) => ExportOptions::Null,
        };
        exporter.check_options(&options)?;
        out.push((exporter, options));
    }
    for section in setting.export.keys() {
        exporter_by_name(section).map_err(|e| ApiError::Setting(format!("[export.{section}]: {e}")))?;
        if !names.contains(section) {
            return Err(ApiError::Setting(format!(
                "[export.{section}] gives options to an exporter this run does not use (exporters: {}); add it with `--export {section}` or `exporters = [...]`, or remove the section",
                names.join(", ")
            )));
        }
    }
    Ok(out)
}

/// Runs `exporters` on `model` into `dir` (created if missing); returns every file written.
pub fn export_all(
    model: &Model,
    exporters: &[(Arc<dyn Exporter>, ExportOptions)],
    dir: &Path,
) -> Result<Vec<Artifact>> {
    std::fs::create_dir_all(dir).map_err(|source| ApiError::Io { path: dir.display().to_string(), source })?;
    let mut files = Vec::new();
    for (exporter, options) in exporters {
        files.extend(exporter.export(model, options, dir)?);
    }
    Ok(files)
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, then a rename).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let io = |source| ApiError::Io { path: path.display().to_string(), source };
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Puts the configs of a quant JSON (written by the `quant-json` exporter) back on a float model:
/// the original model or the fused `model.float.onnx` — the opset conversion of a model older
/// than 13 and the structural fusions of `pipeline` (constant and BN folding) are applied first,
/// as quantization did, so the JSON's names match either way.
pub fn apply_quant_config(model: &mut Model, path: &Path, pipeline: &mppq_passes::PipelineSetting) -> Result<()> {
    let json = read_quant_json(path)?;
    crate::model::upgrade::upgrade_for_quantization(model)?;
    model.graph.name_operations();
    if pipeline.fusion.constant_fold {
        let imports = model.opset_imports.clone();
        let opsets = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let (registry, device) = (mppq_exec::OpRegistry::builtin(), mppq_exec::Device::cpu());
        mppq_passes::structural::fold_constants::fold_all_constants(&mut model.graph, &registry, &device, &opsets)?;
    }
    if pipeline.fusion.bn_fold {
        mppq_passes::structural::fold_batchnorm::fold_all(&mut model.graph)?;
    }
    // The JSON is the user's file: name it, not a setting.
    apply_quant_json(&mut model.graph, &json).map_err(|e| match e {
        mppq_onnx::export::ExportError::Json { message, .. } => {
            ApiError::data(path, format!("quantization JSON does not fit the model: {message}"))
        }
        other => ApiError::data(path, other.to_string()),
    })
}
