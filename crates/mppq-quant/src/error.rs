//! The error type of quantizers and observers. Every data-dependent error names the variable.

use mppq_ir::IrError;

pub type Result<T, E = QuantError> = std::result::Result<T, E>;

/// What can go wrong calibrating or quantizing.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    #[error("variable `{variable}`: observed {value} at element {index}; calibration data must be finite")]
    NonFinite { variable: String, index: usize, value: f32 },
    #[error("variable `{variable}`: {message}")]
    Shape { variable: String, message: String },
    #[error("variable `{variable}`: {expected} channels along axis {axis} before, {got} now")]
    ChannelCountChanged { variable: String, axis: usize, expected: usize, got: usize },
    #[error("variable `{variable}`: observer `{observer}` has observed nothing{detail}")]
    NothingObserved { variable: String, observer: &'static str, detail: String },
    #[error("variable `{variable}`: observer `{observer}` {message}")]
    PassOrder { variable: String, observer: &'static str, message: String },
    #[error("variable `{variable}`: observer `{observer}` does not support {message}")]
    UnsupportedPolicy { variable: String, observer: &'static str, message: String },
    #[error("variable `{variable}`: the config does not match observer `{observer}`: {message}")]
    ConfigMismatch { variable: String, observer: &'static str, message: String },
    #[error("observer `{observer}`: invalid option: {message}")]
    InvalidOption { observer: String, message: String },
    #[error("unknown observer `{name}` (known: {})", .known.join(", "))]
    UnknownObserver { name: String, known: Vec<&'static str> },
    /// A calibration batch could not be read, or the model failed to run on it.
    #[error("calibration batch {batch}: {message}")]
    Batch { batch: usize, message: String },
    #[error(transparent)]
    Ir(#[from] IrError),
}
