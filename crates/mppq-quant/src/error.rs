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
    /// A quantizer setting out of its range (`lowbit` with 9-bit weights).
    #[error("quantizer `{quantizer}`: {setting} = {value}: {expected}")]
    QuantizerSetting { quantizer: String, setting: &'static str, value: String, expected: String },
    #[error("unknown quantizer `{name}` (known: {})", .known.join(", "))]
    UnknownQuantizer { name: String, known: Vec<&'static str> },
    /// A dispatcher sent an operation to a quantizer that does not declare its type.
    #[error(
        "operation `{op}` ({op_type}) was dispatched to {precision}, but quantizer `{quantizer}` does not declare that type"
    )]
    UndeclaredType { quantizer: String, op: String, op_type: String, precision: String },
    /// Activations need calibration and no batch was given.
    #[error("the calibration set is empty: give at least one batch")]
    EmptyCalibration,
    /// A calibration batch could not be read, or the model failed to run on it.
    #[error("calibration batch {batch}: {message}")]
    Batch { batch: usize, message: String },
    #[error(transparent)]
    Ir(#[from] IrError),
}
