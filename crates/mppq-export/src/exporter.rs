//! The [`Exporter`] trait: what writes the files a target loads from a quantized model, with
//! its options ([`ExportOptions`], parsed by [`parse_options`]) and the [`Artifact`]s it wrote.

use crate::error::{ExportError, Result};
use mppq_ir::Model;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

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

/// Parses an exporter's options into its typed struct (missing keys take their defaults when
/// the struct says `#[serde(default)]`); errors name the section.
pub fn parse_options<T: DeserializeOwned>(exporter: &str, options: &ExportOptions) -> Result<T> {
    let options = if options.is_null() { ExportOptions::Object(Default::default()) } else { options.clone() };
    serde_json::from_value(options).map_err(|e| ExportError::Setting(format!("[export.{exporter}]: {e}")))
}

/// The options of an exporter that takes none: only an empty section (or none) is accepted.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

/// Writes `bytes` to `path` atomically (a temporary file beside it, then a rename).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let io = |source| ExportError::Io { path: path.display().to_string(), source };
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}
