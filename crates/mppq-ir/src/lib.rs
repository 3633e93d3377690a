//! The graph IR of mppq, at the bottom of the crate stack.
//!
//! It owns the in-memory model ([`Model`], [`Graph`], [`Operation`], [`Variable`]) with stable
//! ids, typed attributes ([`Attribute`]), element types ([`DataType`]), the codes of the low-precision
//! ones ([`lowp`]: FP8, FP4, E8M0, 4/2-bit integers) and tensors ([`TensorData`]); the editing API,
//! topological order and sub-graph extraction ([`edit`], [`topo`], [`extract`]); a float fingerprint
//! ([`fingerprint`]); pattern search
//! ([`pattern`]); structural rewrites that need no executor ([`morph`]); the operator-role table every
//! pass, quantizer and dispatcher reads ([`roles`]); the quantization data model that operations
//! carry ([`quant`]); and the registry of named extensions the upper crates host ([`registry`]). It knows nothing of file formats or execution.

pub mod attribute;
pub mod dtype;
pub mod edit;
pub mod error;
pub mod extract;
pub mod fingerprint;
pub mod graph;
pub mod lowp;
pub mod morph;
pub mod pattern;
pub mod quant;
pub mod registry;
pub mod roles;
pub mod tensor;
pub mod topo;
pub mod validate;
pub mod value_type;

pub use attribute::{Attribute, AttributeKind};
pub use dtype::DataType;
pub use error::{IrError, Result};
pub use graph::{Graph, Model, OpId, Operation, VarId, Variable};
pub use roles::{ChannelAxis, InputRole, OpClass, OpRoles, op_roles, types_in_class};
pub use tensor::TensorData;
pub use value_type::{Dim, TensorType, ValueType};
