//! The exporter registry: the built-in exporters ([`crate::formats::builtin`]) and
//! those users register, looked up by name; [`resolve_exporters`] picks and checks a run's
//! exporters before any work, [`export_all`] runs them.

use crate::error::{ExportError, Result};
use crate::exporter::{Artifact, ExportOptions, Exporter};
use mppq_ir::Model;
use mppq_ir::registry::Registry;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The exporters a platform runs unless told otherwise.
pub const DEFAULT_EXPORTERS: [&str; 3] = ["qdq", "quant-json", "float-onnx"];

static EXPORTERS: Registry<dyn Exporter> =
    Registry::new("exporter", || crate::formats::builtin().into_iter().map(|e| (e.name().to_string(), e)).collect());

/// Registers an exporter; a name already taken is an error.
pub fn register_exporter(exporter: Arc<dyn Exporter>) -> Result<()> {
    let name = exporter.name().to_string();
    Ok(EXPORTERS.register(&name, exporter)?)
}

/// The exporter called `name`; the error lists the known ones.
pub fn exporter_by_name(name: &str) -> Result<Arc<dyn Exporter>> {
    Ok(EXPORTERS.get(name)?)
}

/// Names of every registered exporter, sorted.
pub fn exporter_names() -> Vec<String> {
    EXPORTERS.names()
}

/// The exporters a run uses, each with its options: `chosen` (the setting's `exporters`) when
/// given, else the platform's defaults. An exporter's options are the platform's (`platform_options`, e.g. FP8
/// Q/DQ allowed) with the user's `[export.NAME]` keys over them. Every `[export.NAME]` section
/// must name an exporter of the run (options for an exporter that does not run would be silently
/// ignored), and every exporter checks its options here, before calibration.
pub fn resolve_exporters(
    chosen: Option<&[String]>,
    sections: &BTreeMap<String, ExportOptions>,
    platform_defaults: &[String],
    platform_options: &BTreeMap<String, ExportOptions>,
) -> Result<Vec<(Arc<dyn Exporter>, ExportOptions)>> {
    let names = chosen.map(<[String]>::to_vec).unwrap_or_else(|| platform_defaults.to_vec());
    let mut out: Vec<(Arc<dyn Exporter>, ExportOptions)> = Vec::new();
    for name in &names {
        if out.iter().any(|(e, _)| e.name() == name) {
            continue;
        }
        let exporter = exporter_by_name(name)?;
        let options = match (platform_options.get(name), sections.get(name)) {
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
    for section in sections.keys() {
        exporter_by_name(section).map_err(|e| ExportError::Setting(format!("[export.{section}]: {e}")))?;
        if !names.contains(section) {
            return Err(ExportError::Setting(format!(
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
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Io { path: dir.display().to_string(), source })?;
    let mut files = Vec::new();
    for (exporter, options) in exporters {
        files.extend(exporter.export(model, options, dir)?);
    }
    Ok(files)
}
