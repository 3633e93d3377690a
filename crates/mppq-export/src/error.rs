//! The error type of exports and imports: every variant names the operation, tensor, file or
//! option concerned, and what would fix it.

use mppq_ir::IrError;
use mppq_onnx::OnnxError;

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Why an export (or a JSON import) failed: every variant names the operation and tensor, and
/// what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "operation `{op}` ({op_type}): the config of tensor `{tensor}` is in state {state} and has no scale: calibrate the model before exporting"
    )]
    NotCalibrated { op: String, op_type: String, tensor: String, state: String },
    #[error("operation `{op}` ({op_type}), tensor `{tensor}`: {message}")]
    Unsupported { op: String, op_type: String, tensor: String, message: String },
    #[error(
        "cannot raise the opset from {from} to {to} (needed for {why}): {}",
        .blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Opset { from: i64, to: i64, why: String, blockers: Vec<mppq_ir::morph::OpsetBlocker> },
    #[error("export option `{option}`: {message}")]
    BadOption { option: String, message: String },
    #[error("quantization JSON `{file}`: {message}")]
    Json { file: String, message: String },
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A setting, option or exporter choice that cannot be honoured.
    #[error("setting: {0}")]
    Setting(String),
    /// A file that cannot be read or written.
    #[error("`{path}`: {source}")]
    Io { path: String, source: std::io::Error },
    /// A user's file (a range table) that does not hold what it should.
    #[error("`{file}`: {message}")]
    Data { file: String, message: String },
}

impl ExportError {
    pub(crate) fn data(file: impl AsRef<std::path::Path>, message: impl Into<String>) -> Self {
        ExportError::Data { file: file.as_ref().display().to_string(), message: message.into() }
    }
}

impl From<mppq_ir::registry::RegistryError> for ExportError {
    fn from(e: mppq_ir::registry::RegistryError) -> Self {
        ExportError::Setting(e.to_string())
    }
}
