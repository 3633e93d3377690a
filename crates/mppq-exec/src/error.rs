//! The executor's error type: every variant names the operation (node name and type) it
//! concerns, and unsupported operators name their domain and opset.

use mppq_ir::IrError;

pub type Result<T, E = ExecError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("operator {op_type} (domain `{domain}`, opset {opset}) of node `{node}` is not supported{hint}")]
    Unsupported { op_type: String, domain: String, opset: i64, node: String, hint: String },
    /// A mode of a supported operator that this executor does not implement, found only at
    /// run time (e.g. an input that switches Dropout to training mode).
    #[error("node `{node}` ({op_type}): {feature} is not implemented")]
    NotImplemented { node: String, op_type: String, feature: String },
    #[error("node `{node}` ({op_type}): {message}")]
    Op { node: String, op_type: String, message: String },
    #[error("node `{node}` ({op_type}): shapes {left:?} and {right:?} {message}")]
    Shape { node: String, op_type: String, left: Vec<usize>, right: Vec<usize>, message: String },
    #[error("graph input `{name}`: {message}")]
    Input { name: String, message: String },
    #[error("no value for `{0}`: it is not a graph input, initializer or output of any executed node")]
    MissingValue(String),
    #[error("node `{node}` ({op_type}) failed inside the tensor backend: {message}")]
    Backend { node: String, op_type: String, message: String },
    /// A GPU device on which an earlier backend panic was caught: its buffers may be corrupt, so
    /// it computes nothing more in this process (restart it, or run on `cpu`).
    #[error(
        "node `{node}` ({op_type}) not run: the device is unusable after an earlier backend failure ({cause}); restart the process or use the cpu device"
    )]
    DevicePoisoned { node: String, op_type: String, cause: String },
    /// A stop was asked for ([`crate::cancel::request_stop`]; Ctrl-C in the Python binding).
    #[error("stopped on request before the run finished (nothing was written)")]
    Stopped,
    #[error(transparent)]
    Ir(#[from] IrError),
}
