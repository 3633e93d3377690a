//! `TypeProto` ⇄ [`ValueType`]: tensor types with symbolic dimensions, and container types.

use crate::proto::{TensorShapeProto, TypeProto, tensor_shape_proto, type_proto};
use mppq_ir::{DataType, Dim, TensorType, ValueType};

fn shape_from_proto(s: &Option<TensorShapeProto>) -> Option<Vec<Dim>> {
    let s = s.as_ref()?;
    Some(
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(tensor_shape_proto::dimension::Value::DimValue(v)) => Dim::Known(*v),
                Some(tensor_shape_proto::dimension::Value::DimParam(p)) => Dim::Symbolic(p.clone()),
                None => Dim::Unknown,
            })
            .collect(),
    )
}

fn shape_to_proto(s: &Option<Vec<Dim>>) -> Option<TensorShapeProto> {
    let dims = s.as_ref()?;
    Some(TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| tensor_shape_proto::Dimension {
                value: match d {
                    Dim::Known(v) => Some(tensor_shape_proto::dimension::Value::DimValue(*v)),
                    Dim::Symbolic(p) => Some(tensor_shape_proto::dimension::Value::DimParam(p.clone())),
                    Dim::Unknown => None,
                },
                denotation: None,
            })
            .collect(),
    })
}

fn elem(code: Option<i32>) -> Option<DataType> {
    code.and_then(DataType::from_onnx_code)
}

pub fn value_type_from_proto(t: &TypeProto) -> ValueType {
    use type_proto::Value;
    match &t.value {
        Some(Value::TensorType(tt)) => {
            ValueType::Tensor(TensorType { dtype: elem(tt.elem_type), shape: shape_from_proto(&tt.shape) })
        }
        Some(Value::SparseTensorType(tt)) => {
            ValueType::SparseTensor(TensorType { dtype: elem(tt.elem_type), shape: shape_from_proto(&tt.shape) })
        }
        Some(Value::SequenceType(s)) => {
            ValueType::Sequence(s.elem_type.as_deref().map(|e| Box::new(value_type_from_proto(e))))
        }
        Some(Value::OptionalType(s)) => {
            ValueType::Optional(s.elem_type.as_deref().map(|e| Box::new(value_type_from_proto(e))))
        }
        Some(Value::MapType(m)) => ValueType::Map {
            key: elem(m.key_type),
            value: m.value_type.as_deref().map(|e| Box::new(value_type_from_proto(e))),
        },
        Some(Value::OpaqueType(o)) => {
            ValueType::Opaque { domain: o.domain.clone().unwrap_or_default(), name: o.name.clone().unwrap_or_default() }
        }
        None => ValueType::Unset,
    }
}

pub fn value_type_to_proto(t: &ValueType) -> TypeProto {
    use type_proto::Value;
    let code = |d: Option<DataType>| d.map(DataType::onnx_code);
    let boxed = |v: &Option<Box<ValueType>>| v.as_deref().map(|e| Box::new(value_type_to_proto(e)));
    let value = match t {
        ValueType::Tensor(tt) => {
            Some(Value::TensorType(type_proto::Tensor { elem_type: code(tt.dtype), shape: shape_to_proto(&tt.shape) }))
        }
        ValueType::SparseTensor(tt) => Some(Value::SparseTensorType(type_proto::SparseTensor {
            elem_type: code(tt.dtype),
            shape: shape_to_proto(&tt.shape),
        })),
        ValueType::Sequence(e) => Some(Value::SequenceType(Box::new(type_proto::Sequence { elem_type: boxed(e) }))),
        ValueType::Optional(e) => Some(Value::OptionalType(Box::new(type_proto::Optional { elem_type: boxed(e) }))),
        ValueType::Map { key, value } => {
            Some(Value::MapType(Box::new(type_proto::Map { key_type: code(*key), value_type: boxed(value) })))
        }
        ValueType::Opaque { domain, name } => {
            Some(Value::OpaqueType(type_proto::Opaque { domain: Some(domain.clone()), name: Some(name.clone()) }))
        }
        ValueType::Unset => None,
    };
    TypeProto { value, denotation: None }
}
