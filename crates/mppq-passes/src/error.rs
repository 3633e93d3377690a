//! The error type of passes and pipelines: every error names the pass it came from.

use mppq_dispatch::DispatchError;
use mppq_exec::ExecError;
use mppq_ir::IrError;
use mppq_quant::QuantError;

pub type Result<T, E = PassError> = std::result::Result<T, E>;

/// What can go wrong running a pass or building a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("pass `{pass}`: {source}")]
    Ir { pass: &'static str, source: IrError },
    #[error("pass `{pass}`: {source}")]
    /// Boxed: an executor error is large, and every pass returns this type.
    Exec { pass: &'static str, source: Box<ExecError> },
    #[error("pass `{pass}`: {source}")]
    Quant { pass: &'static str, source: QuantError },
    #[error("pass `{pass}`: {source}")]
    Dispatch { pass: &'static str, source: DispatchError },
    #[error("pass `{pass}`: {message}")]
    Invalid { pass: &'static str, message: String },
    #[error("pipeline setting: {0}")]
    Setting(String),
}

/// Attaches the pass name to a lower crate's error.
pub trait InPass<T> {
    fn in_pass(self, pass: &'static str) -> Result<T>;
}

impl<T> InPass<T> for std::result::Result<T, IrError> {
    fn in_pass(self, pass: &'static str) -> Result<T> {
        self.map_err(|source| PassError::Ir { pass, source })
    }
}

impl<T> InPass<T> for std::result::Result<T, ExecError> {
    fn in_pass(self, pass: &'static str) -> Result<T> {
        self.map_err(|source| PassError::Exec { pass, source: Box::new(source) })
    }
}

impl<T> InPass<T> for std::result::Result<T, QuantError> {
    fn in_pass(self, pass: &'static str) -> Result<T> {
        self.map_err(|source| PassError::Quant { pass, source })
    }
}

impl<T> InPass<T> for std::result::Result<T, DispatchError> {
    fn in_pass(self, pass: &'static str) -> Result<T> {
        self.map_err(|source| PassError::Dispatch { pass, source })
    }
}
