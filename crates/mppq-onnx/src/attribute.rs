//! `AttributeProto` ⇄ [`Attribute`], every kind including sub-graphs, sparse tensors and type
//! protos. Old files without an explicit `type` get it inferred from the field that is set.

use crate::error::{OnnxError, Result};
use crate::load::{LoadCtx, graph_from_proto};
use crate::proto::{AttributeProto, SparseTensorProto, attribute_proto::AttributeType};
use crate::save::graph_to_proto;
use crate::tensor::{Source, tensor_from_proto, tensor_to_proto};
use crate::value_type::{value_type_from_proto, value_type_to_proto};
use mppq_ir::attribute::SparseTensor;
use mppq_ir::{Attribute, AttributeKind};
use std::collections::HashSet;

pub(crate) fn sparse_from_proto(s: &SparseTensorProto, src: &Source<'_>, place: &str) -> Result<SparseTensor> {
    let missing = |what: &str| OnnxError::invalid(src.file, place, format!("sparse tensor has no {what}"));
    Ok(SparseTensor {
        values: tensor_from_proto(s.values.as_ref().ok_or_else(|| missing("values"))?, src, place)?,
        indices: tensor_from_proto(s.indices.as_ref().ok_or_else(|| missing("indices"))?, src, place)?,
        dims: s.dims.clone(),
    })
}

pub(crate) fn sparse_to_proto(name: &str, s: &SparseTensor) -> SparseTensorProto {
    SparseTensorProto {
        values: Some(tensor_to_proto(name, &s.values)),
        indices: Some(tensor_to_proto("", &s.indices)),
        dims: s.dims.clone(),
    }
}

fn kind_from_proto(t: AttributeType) -> AttributeKind {
    use AttributeType as T;
    match t {
        T::Float => AttributeKind::Float,
        T::Int => AttributeKind::Int,
        T::String => AttributeKind::String,
        T::Tensor => AttributeKind::Tensor,
        T::Graph => AttributeKind::Graph,
        T::SparseTensor => AttributeKind::SparseTensor,
        T::TypeProto => AttributeKind::TypeProto,
        T::Floats => AttributeKind::Floats,
        T::Ints => AttributeKind::Ints,
        T::Strings => AttributeKind::Strings,
        T::Tensors => AttributeKind::Tensors,
        T::Graphs => AttributeKind::Graphs,
        T::SparseTensors => AttributeKind::SparseTensors,
        T::TypeProtos => AttributeKind::TypeProtos,
        T::Undefined => AttributeKind::Undefined,
    }
}

fn kind_to_proto(k: AttributeKind) -> AttributeType {
    use AttributeType as T;
    match k {
        AttributeKind::Float => T::Float,
        AttributeKind::Int => T::Int,
        AttributeKind::String => T::String,
        AttributeKind::Tensor => T::Tensor,
        AttributeKind::Graph => T::Graph,
        AttributeKind::SparseTensor => T::SparseTensor,
        AttributeKind::TypeProto => T::TypeProto,
        AttributeKind::Floats => T::Floats,
        AttributeKind::Ints => T::Ints,
        AttributeKind::Strings => T::Strings,
        AttributeKind::Tensors => T::Tensors,
        AttributeKind::Graphs => T::Graphs,
        AttributeKind::SparseTensors => T::SparseTensors,
        AttributeKind::TypeProtos => T::TypeProtos,
        AttributeKind::Undefined => T::Undefined,
    }
}

/// The kind of an attribute whose `type` is missing (IR < 2 files): the field that is set.
fn infer_kind(a: &AttributeProto) -> AttributeType {
    use AttributeType as T;
    if a.f.is_some() {
        T::Float
    } else if a.i.is_some() {
        T::Int
    } else if a.s.is_some() {
        T::String
    } else if a.t.is_some() {
        T::Tensor
    } else if a.g.is_some() {
        T::Graph
    } else if !a.floats.is_empty() {
        T::Floats
    } else if !a.ints.is_empty() {
        T::Ints
    } else if !a.strings.is_empty() {
        T::Strings
    } else if !a.tensors.is_empty() {
        T::Tensors
    } else if !a.graphs.is_empty() {
        T::Graphs
    } else {
        T::Undefined
    }
}

pub(crate) fn attribute_from_proto(
    a: &AttributeProto,
    ctx: &LoadCtx<'_>,
    place: &str,
    scope: &HashSet<String>,
) -> Result<Attribute> {
    use AttributeType as T;
    let file = ctx.src.file;
    let kind = match a.r#type.and_then(|t| AttributeType::try_from(t).ok()) {
        Some(T::Undefined) | None => infer_kind(a),
        Some(t) => t,
    };
    if let Some(r) = a.ref_attr_name.as_ref().filter(|r| !r.is_empty()) {
        return Ok(Attribute::Ref { name: r.clone(), kind: kind_from_proto(kind) });
    }
    let missing = || OnnxError::invalid(file, place, format!("is declared {kind:?} but holds no such value"));
    let graph = |g| graph_from_proto(g, ctx, scope);
    Ok(match kind {
        T::Float => Attribute::Float(a.f.ok_or_else(missing)?),
        T::Int => Attribute::Int(a.i.ok_or_else(missing)?),
        T::String => Attribute::String(a.s.clone().ok_or_else(missing)?),
        T::Tensor => Attribute::Tensor(tensor_from_proto(a.t.as_ref().ok_or_else(missing)?, &ctx.src, place)?),
        T::Graph => Attribute::Graph(Box::new(graph(a.g.as_ref().ok_or_else(missing)?)?)),
        T::SparseTensor => {
            Attribute::SparseTensor(sparse_from_proto(a.sparse_tensor.as_ref().ok_or_else(missing)?, &ctx.src, place)?)
        }
        T::TypeProto => Attribute::TypeProto(value_type_from_proto(a.tp.as_ref().ok_or_else(missing)?)),
        T::Floats => Attribute::Floats(a.floats.clone()),
        T::Ints => Attribute::Ints(a.ints.clone()),
        T::Strings => Attribute::Strings(a.strings.clone()),
        T::Tensors => {
            Attribute::Tensors(a.tensors.iter().map(|t| tensor_from_proto(t, &ctx.src, place)).collect::<Result<_>>()?)
        }
        T::Graphs => Attribute::Graphs(a.graphs.iter().map(graph).collect::<Result<_>>()?),
        T::SparseTensors => Attribute::SparseTensors(
            a.sparse_tensors.iter().map(|s| sparse_from_proto(s, &ctx.src, place)).collect::<Result<_>>()?,
        ),
        T::TypeProtos => Attribute::TypeProtos(a.type_protos.iter().map(value_type_from_proto).collect()),
        T::Undefined => return Err(OnnxError::invalid(file, place, "has no value")),
    })
}

pub(crate) fn attribute_to_proto(name: &str, a: &Attribute) -> AttributeProto {
    let mut p = AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(kind_to_proto(a.kind()) as i32),
        ..Default::default()
    };
    match a {
        Attribute::Float(v) => p.f = Some(*v),
        Attribute::Int(v) => p.i = Some(*v),
        Attribute::String(v) => p.s = Some(v.clone()),
        Attribute::Tensor(t) => p.t = Some(tensor_to_proto("", t)),
        Attribute::Graph(g) => p.g = Some(graph_to_proto(g)),
        Attribute::SparseTensor(s) => p.sparse_tensor = Some(sparse_to_proto("", s)),
        Attribute::TypeProto(t) => p.tp = Some(value_type_to_proto(t)),
        Attribute::Floats(v) => p.floats = v.clone(),
        Attribute::Ints(v) => p.ints = v.clone(),
        Attribute::Strings(v) => p.strings = v.clone(),
        Attribute::Tensors(v) => p.tensors = v.iter().map(|t| tensor_to_proto("", t)).collect(),
        Attribute::Graphs(v) => p.graphs = v.iter().map(graph_to_proto).collect(),
        Attribute::SparseTensors(v) => p.sparse_tensors = v.iter().map(|s| sparse_to_proto("", s)).collect(),
        Attribute::TypeProtos(v) => p.type_protos = v.iter().map(value_type_to_proto).collect(),
        Attribute::Ref { name: r, .. } => p.ref_attr_name = Some(r.clone()),
    }
    p
}
