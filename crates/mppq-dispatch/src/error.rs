//! Errors of the dispatchers.

use mppq_ir::IrError;

/// Everything that can go wrong while dispatching a graph.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// No dispatcher is registered under this name.
    #[error("unknown dispatcher `{name}`; valid dispatchers: {}", .valid.join(", "))]
    UnknownDispatcher { name: String, valid: Vec<String> },
    /// A dispatcher with this name is already registered.
    #[error("a dispatcher named `{0}` is already registered")]
    DuplicateDispatcher(String),
    /// The precision given for quantized operations is not a quantized one.
    #[error("`{0}` is not a quantized precision; dispatchers need one such as int8")]
    NotQuantized(String),
    /// An ignored scope names a variable the graph does not have.
    #[error("ignored scope: no variable named `{0}` in the graph")]
    UnknownScopeVariable(String),
    /// The graph itself is malformed (e.g. it has a cycle).
    #[error(transparent)]
    Ir(#[from] IrError),
}
