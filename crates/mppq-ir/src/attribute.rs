//! Operation attributes, every ONNX `AttributeProto` kind kept typed (including sub-graphs and
//! type protos), with accessors that turn a wrong kind into a typed error.

use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::tensor::TensorData;
use crate::value_type::ValueType;
use serde::{Deserialize, Serialize};

/// A sparse tensor attribute or initializer: values, indices and dense shape, as ONNX stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SparseTensor {
    pub values: TensorData,
    pub indices: TensorData,
    pub dims: Vec<i64>,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Attribute {
    Float(f32),
    Int(i64),
    /// ONNX strings are bytes; usually UTF-8.
    String(Vec<u8>),
    Tensor(TensorData),
    Graph(Box<Graph>),
    SparseTensor(SparseTensor),
    TypeProto(ValueType),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<Vec<u8>>),
    Tensors(Vec<TensorData>),
    Graphs(Vec<Graph>),
    SparseTensors(Vec<SparseTensor>),
    TypeProtos(Vec<ValueType>),
    /// Inside a function body: refers to an attribute of the calling node.
    Ref {
        name: String,
        kind: AttributeKind,
    },
}

/// The kind of an attribute, matching `AttributeProto.AttributeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttributeKind {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    SparseTensor,
    TypeProto,
    Floats,
    Ints,
    Strings,
    Tensors,
    Graphs,
    SparseTensors,
    TypeProtos,
    Undefined,
}

impl Attribute {
    pub fn kind(&self) -> AttributeKind {
        match self {
            Attribute::Float(_) => AttributeKind::Float,
            Attribute::Int(_) => AttributeKind::Int,
            Attribute::String(_) => AttributeKind::String,
            Attribute::Tensor(_) => AttributeKind::Tensor,
            Attribute::Graph(_) => AttributeKind::Graph,
            Attribute::SparseTensor(_) => AttributeKind::SparseTensor,
            Attribute::TypeProto(_) => AttributeKind::TypeProto,
            Attribute::Floats(_) => AttributeKind::Floats,
            Attribute::Ints(_) => AttributeKind::Ints,
            Attribute::Strings(_) => AttributeKind::Strings,
            Attribute::Tensors(_) => AttributeKind::Tensors,
            Attribute::Graphs(_) => AttributeKind::Graphs,
            Attribute::SparseTensors(_) => AttributeKind::SparseTensors,
            Attribute::TypeProtos(_) => AttributeKind::TypeProtos,
            Attribute::Ref { kind, .. } => *kind,
        }
    }

    fn mismatch(&self, name: &str, expected: AttributeKind) -> IrError {
        IrError::AttributeKind { name: name.to_string(), expected, got: self.kind() }
    }

    pub fn as_int(&self, name: &str) -> Result<i64> {
        match self {
            Attribute::Int(v) => Ok(*v),
            _ => Err(self.mismatch(name, AttributeKind::Int)),
        }
    }

    pub fn as_float(&self, name: &str) -> Result<f32> {
        match self {
            Attribute::Float(v) => Ok(*v),
            // Exporters sometimes write an integral float as an int.
            Attribute::Int(v) => Ok(*v as f32),
            _ => Err(self.mismatch(name, AttributeKind::Float)),
        }
    }

    pub fn as_str(&self, name: &str) -> Result<String> {
        match self {
            Attribute::String(v) => Ok(String::from_utf8_lossy(v).into_owned()),
            _ => Err(self.mismatch(name, AttributeKind::String)),
        }
    }

    pub fn as_ints(&self, name: &str) -> Result<&[i64]> {
        match self {
            Attribute::Ints(v) => Ok(v),
            _ => Err(self.mismatch(name, AttributeKind::Ints)),
        }
    }

    pub fn as_floats(&self, name: &str) -> Result<&[f32]> {
        match self {
            Attribute::Floats(v) => Ok(v),
            _ => Err(self.mismatch(name, AttributeKind::Floats)),
        }
    }

    pub fn as_tensor(&self, name: &str) -> Result<&TensorData> {
        match self {
            Attribute::Tensor(v) => Ok(v),
            _ => Err(self.mismatch(name, AttributeKind::Tensor)),
        }
    }

    pub fn as_graph(&self, name: &str) -> Result<&Graph> {
        match self {
            Attribute::Graph(g) => Ok(g),
            _ => Err(self.mismatch(name, AttributeKind::Graph)),
        }
    }
}
