//! The error type of graph construction, editing and morphs.

use crate::attribute::AttributeKind;
use crate::dtype::DataType;

pub type Result<T, E = IrError> = std::result::Result<T, E>;

/// What can go wrong building, validating or editing a graph.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    #[error("variable `{0}` already exists")]
    DuplicateVariable(String),
    #[error("variable `{name}` is produced twice: by `{first}` and by `{second}`")]
    DuplicateProducer { name: String, first: String, second: String },
    #[error("operation `{op}` reads `{name}`, which no operation, graph input or initializer provides")]
    DanglingInput { op: String, name: String },
    #[error("graph output `{0}` is not produced by any operation, graph input or initializer")]
    DanglingOutput(String),
    #[error("the graph has a cycle: {}", .cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    #[error("no variable with id {0}")]
    UnknownVariable(usize),
    #[error("no operation with id {0}")]
    UnknownOperation(usize),
    #[error("no variable named `{0}`")]
    UnknownVariableName(String),
    #[error("operation `{op}`: {message}")]
    InvalidEdit { op: String, message: String },
    #[error("attribute `{name}` should be {expected:?}, found {got:?}")]
    AttributeKind { name: String, expected: AttributeKind, got: AttributeKind },
    #[error("operation `{op}` ({op_type}) has no attribute `{name}`")]
    MissingAttribute { op: String, op_type: String, name: String },
    #[error("expected a {expected} tensor, found {got}")]
    DTypeMismatch { expected: DataType, got: DataType },
    #[error("invalid tensor: {0}")]
    InvalidTensor(String),
    #[error("invalid quantization config: {0}")]
    InvalidQuantConfig(String),
    /// A block cannot be cut out of a graph ([`crate::Graph::extract`]).
    #[error("extracting a block of graph `{graph}`: {message}")]
    Extract { graph: String, message: String },
    #[error("morph `{morph}` on `{op}`: {message}")]
    Morph { morph: &'static str, op: String, message: String },
    /// [`crate::morph::upgrade_opset`] met operations it cannot convert.
    #[error(
        "cannot convert graph `{graph}` from opset {from} to {to}: {}",
        .blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    OpsetBlocked { graph: String, from: i64, to: i64, blockers: Vec<crate::morph::OpsetBlocker> },
}
