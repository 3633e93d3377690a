//! Types of values flowing along edges (ONNX `TypeProto`): tensors with possibly symbolic
//! shapes, and the container types (sequence, optional, map) some graphs move around.

use crate::dtype::DataType;
use serde::{Deserialize, Serialize};

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    Known(i64),
    /// A named dimension (`dim_param`), e.g. `batch`.
    Symbolic(String),
    /// Present but neither value nor name given.
    Unknown,
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Known(v) => write!(f, "{v}"),
            Dim::Symbolic(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// A tensor type: element type (may be undeclared) and shape (may be unknown rank).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorType {
    pub dtype: Option<DataType>,
    pub shape: Option<Vec<Dim>>,
}

impl TensorType {
    pub fn new(dtype: DataType, shape: Vec<Dim>) -> Self {
        Self { dtype: Some(dtype), shape: Some(shape) }
    }

    /// Fully known shape as sizes, if every dimension is a known non-negative number.
    pub fn concrete_shape(&self) -> Option<Vec<usize>> {
        self.shape
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Known(v) if *v >= 0 => Some(*v as usize),
                _ => None,
            })
            .collect()
    }
}

/// The type of a value (ONNX `TypeProto`, denotations kept).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ValueType {
    Tensor(TensorType),
    SparseTensor(TensorType),
    Sequence(Option<Box<ValueType>>),
    Optional(Option<Box<ValueType>>),
    Map {
        key: Option<DataType>,
        value: Option<Box<ValueType>>,
    },
    Opaque {
        domain: String,
        name: String,
    },
    /// A `TypeProto` with no value set.
    Unset,
}

impl ValueType {
    pub fn tensor(dtype: DataType, shape: Vec<Dim>) -> Self {
        ValueType::Tensor(TensorType::new(dtype, shape))
    }

    pub fn as_tensor(&self) -> Option<&TensorType> {
        match self {
            ValueType::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fmt_tensor = |f: &mut std::fmt::Formatter<'_>, t: &TensorType| {
            match t.dtype {
                Some(d) => write!(f, "{d}")?,
                None => f.write_str("?")?,
            }
            match &t.shape {
                Some(dims) => {
                    let dims: Vec<String> = dims.iter().map(Dim::to_string).collect();
                    write!(f, "[{}]", dims.join(", "))
                }
                None => f.write_str("[*]"),
            }
        };
        match self {
            ValueType::Tensor(t) => fmt_tensor(f, t),
            ValueType::SparseTensor(t) => {
                f.write_str("sparse ")?;
                fmt_tensor(f, t)
            }
            ValueType::Sequence(Some(e)) => write!(f, "seq({e})"),
            ValueType::Sequence(None) => f.write_str("seq(?)"),
            ValueType::Optional(Some(e)) => write!(f, "optional({e})"),
            ValueType::Optional(None) => f.write_str("optional(?)"),
            ValueType::Map { key, value } => {
                let k = key.map_or("?".to_string(), |k| k.to_string());
                let v = value.as_ref().map_or("?".to_string(), |v| v.to_string());
                write!(f, "map({k}, {v})")
            }
            ValueType::Opaque { domain, name } => write!(f, "opaque({domain}.{name})"),
            ValueType::Unset => f.write_str("?"),
        }
    }
}
