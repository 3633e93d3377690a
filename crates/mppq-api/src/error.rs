//! The API's error type: wraps the lower crates' errors and adds data-file problems, always
//! naming the file and input concerned.

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Onnx(#[from] mppq_onnx::OnnxError),
    /// Boxed: an executor error is large, and every API call returns this type.
    #[error(transparent)]
    Exec(Box<mppq_exec::ExecError>),
    #[error(transparent)]
    Ir(#[from] mppq_ir::IrError),
    #[error("`{file}`: {message}")]
    Data { file: String, message: String },
    #[error(transparent)]
    Export(#[from] mppq_export::ExportError),
    #[error(transparent)]
    Dispatch(#[from] mppq_dispatch::DispatchError),
    #[error(transparent)]
    Quant(#[from] mppq_quant::QuantError),
    #[error(transparent)]
    Pass(#[from] mppq_passes::PassError),
    /// A setting, option or platform choice that cannot be honoured.
    #[error("setting: {0}")]
    Setting(String),
    /// Quantization-aware training ([`crate::qat`]) cannot go on.
    #[error("quantization-aware training: {0}")]
    Training(String),
    #[error("`{path}`: {source}")]
    Io { path: String, source: std::io::Error },
    /// Quantization error analysis could not measure a tensor (NaN/Inf, mismatched runs, …).
    #[error("analysis of tensor `{tensor}`: {message}")]
    Analysis { tensor: String, message: String },
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub(crate) fn data(file: impl AsRef<std::path::Path>, message: impl Into<String>) -> Self {
        ApiError::Data { file: file.as_ref().display().to_string(), message: message.into() }
    }
}

impl From<mppq_exec::ExecError> for ApiError {
    fn from(e: mppq_exec::ExecError) -> Self {
        ApiError::Exec(Box::new(e))
    }
}

impl From<mppq_ir::registry::RegistryError> for ApiError {
    fn from(e: mppq_ir::registry::RegistryError) -> Self {
        ApiError::Setting(e.to_string())
    }
}
