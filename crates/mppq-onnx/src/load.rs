//! Loading: ONNX bytes or files → [`Model`]. Decoding is bounded by the input (a hostile length
//! prefix cannot make it allocate more than the file holds), and the graph is validated:
//! dangling names, duplicate outputs and cycles are typed errors naming the node.

use crate::attribute::attribute_from_proto;
use crate::error::{OnnxError, Result};
use crate::proto::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use crate::tensor::{Source, tensor_from_proto};
use crate::value_type::value_type_from_proto;
use indexmap::IndexMap;
use mppq_ir::{Graph, Model, Operation, TensorData};
use prost::Message;
use std::collections::HashSet;
use std::path::Path;

/// Loads a model file; external data is read relative to the file's directory.
pub fn load_model(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Read { path: label.clone(), source })?;
    load_model_from_bytes(&bytes, path.parent(), &label)
}

/// Loads a model from memory. `base_dir` locates external data (none: external data is an
/// error); `label` names the source in errors.
pub fn load_model_from_bytes(bytes: &[u8], base_dir: Option<&Path>, label: &str) -> Result<Model> {
    let proto = ModelProto::decode(bytes).map_err(|source| OnnxError::Decode { file: label.to_string(), source })?;
    model_from_proto(&proto, base_dir, label)
}

/// Reads a serialized `TensorProto` file (as in ONNX's backend test data).
pub fn decode_tensor_file(path: impl AsRef<Path>) -> Result<TensorData> {
    let path = path.as_ref();
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Read { path: label.clone(), source })?;
    let proto =
        TensorProto::decode(bytes.as_slice()).map_err(|source| OnnxError::Decode { file: label.clone(), source })?;
    tensor_from_proto(&proto, &Source { file: &label, base_dir: path.parent() }, "tensor")
}

pub(crate) struct LoadCtx<'a> {
    pub src: Source<'a>,
    pub opsets: &'a IndexMap<String, i64>,
}

impl LoadCtx<'_> {
    fn opset_of(&self, domain: &str) -> i64 {
        let key = if domain == "ai.onnx" { "" } else { domain };
        self.opsets.get(key).copied().unwrap_or(0)
    }
}

pub fn model_from_proto(proto: &ModelProto, base_dir: Option<&Path>, label: &str) -> Result<Model> {
    let graph_proto = proto
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::invalid(label, "model", "has no graph (is this an ONNX model file?)"))?;
    let mut opsets = IndexMap::new();
    for o in &proto.opset_import {
        let domain = o.domain.clone().unwrap_or_default();
        let version = o.version.unwrap_or(0);
        if opsets.insert(domain.clone(), version).is_some() {
            return Err(OnnxError::invalid(label, "opset_import", format!("domain `{domain}` imported twice")));
        }
    }
    // Before IR 3 there was no opset_import and ONNX meant opset 1. From IR 3 on a model without
    // one is left without: the quantizer refuses it (guessing 1 "converted" opset-13 models).
    if opsets.is_empty() && proto.ir_version.unwrap_or(0) < 3 {
        opsets.insert(String::new(), 1);
    }
    let ctx = LoadCtx { src: Source { file: label, base_dir }, opsets: &opsets };
    let graph = graph_from_proto(graph_proto, &ctx, &HashSet::new())?;
    Ok(Model {
        ir_version: proto.ir_version.unwrap_or(0),
        opset_imports: opsets.clone(),
        producer_name: proto.producer_name.clone().unwrap_or_default(),
        producer_version: proto.producer_version.clone().unwrap_or_default(),
        domain: proto.domain.clone().unwrap_or_default(),
        model_version: proto.model_version.unwrap_or(0),
        doc_string: proto.doc_string.clone().unwrap_or_default(),
        metadata: proto
            .metadata_props
            .iter()
            .map(|e| (e.key.clone().unwrap_or_default(), e.value.clone().unwrap_or_default()))
            .collect(),
        graph,
        functions: proto.functions.iter().map(Message::encode_to_vec).collect(),
        training_info: proto.training_info.iter().map(Message::encode_to_vec).collect(),
    })
}

/// How errors name a node: by name, or by position and type when it has none.
pub(crate) fn node_label(node: &NodeProto, index: usize) -> String {
    let op = node.op_type.as_deref().unwrap_or("?");
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => format!("node `{n}` ({op})"),
        _ => format!("node #{index} ({op})"),
    }
}

/// Converts a graph; `outer` holds the names visible from enclosing graphs (sub-graphs only).
pub(crate) fn graph_from_proto(g: &GraphProto, ctx: &LoadCtx<'_>, outer: &HashSet<String>) -> Result<Graph> {
    let file = ctx.src.file;
    let graph_err = |source| OnnxError::Graph { file: file.to_string(), source };
    let mut graph = Graph::new(g.name.clone().unwrap_or_default());
    graph.doc_string = g.doc_string.clone().unwrap_or_default();

    for t in &g.initializer {
        let name = t.name.clone().unwrap_or_default();
        let place = format!("initializer `{name}`");
        if name.is_empty() {
            return Err(OnnxError::invalid(file, place, "has no name"));
        }
        let value = tensor_from_proto(t, &ctx.src, &place)?;
        graph.add_initializer(name, value).map_err(|_| OnnxError::invalid(file, place, "is defined twice"))?;
    }
    for s in &g.sparse_initializer {
        let sparse = crate::attribute::sparse_from_proto(s, &ctx.src, "sparse initializer")?;
        let name = s.values.as_ref().and_then(|v| v.name.clone()).unwrap_or_default();
        graph.sparse_initializers.push((name, sparse));
    }
    let declare = |graph: &mut Graph, vi: &ValueInfoProto| {
        let id = graph.ensure_variable(vi.name.as_deref().unwrap_or_default());
        if let Ok(v) = graph.variable_mut(id) {
            v.ty = vi.r#type.as_ref().map(value_type_from_proto);
            v.doc_string = vi.doc_string.clone().unwrap_or_default();
        }
        id
    };
    for vi in &g.input {
        let id = declare(&mut graph, vi);
        if graph.is_graph_input(id) {
            return Err(OnnxError::invalid(file, format!("graph input `{}`", graph.var_name(id)), "is listed twice"));
        }
        graph.add_graph_input(id).map_err(graph_err)?;
    }

    // Names a sub-graph may read: ours plus those of enclosing graphs.
    let mut scope: Option<HashSet<String>> = None;
    for (index, node) in g.node.iter().enumerate() {
        let label = node_label(node, index);
        let domain = node.domain.clone().unwrap_or_default();
        let mut op = Operation::new(node.op_type.clone().unwrap_or_default(), node.name.clone().unwrap_or_default())
            .with_domain(domain.clone(), ctx.opset_of(&domain));
        op.doc_string = node.doc_string.clone().unwrap_or_default();
        for a in &node.attribute {
            let name = a.name.clone().unwrap_or_default();
            let place = format!("{label} attribute `{name}`");
            let needs_scope = a.g.is_some() || !a.graphs.is_empty();
            let sub_scope = if needs_scope {
                scope.get_or_insert_with(|| {
                    let mut s = outer.clone();
                    s.extend(g.initializer.iter().filter_map(|t| t.name.clone()));
                    s.extend(g.input.iter().filter_map(|v| v.name.clone()));
                    s.extend(g.node.iter().flat_map(|n| n.output.iter().cloned()));
                    s
                })
            } else {
                outer
            };
            let value = attribute_from_proto(a, ctx, &place, sub_scope)?;
            if op.attributes.insert(name, value).is_some() {
                return Err(OnnxError::invalid(file, place, "is given twice"));
            }
        }
        let inputs: Vec<_> = node.input.iter().map(|n| (!n.is_empty()).then(|| graph.ensure_variable(n))).collect();
        let mut outputs = Vec::with_capacity(node.output.len());
        for name in &node.output {
            if name.is_empty() {
                outputs.push(None);
                continue;
            }
            let id = graph.ensure_variable(name);
            let var = graph.variable(id).map_err(graph_err)?;
            let clash = if let Some(p) = var.producer() {
                let first = graph.operation(p).map(|o| o.name.clone()).unwrap_or_default();
                Some(format!("writes `{name}`, which an earlier node (`{first}`) already produces"))
            } else if var.is_parameter() {
                Some(format!("writes `{name}`, which is an initializer"))
            } else if graph.is_graph_input(id) {
                Some(format!("writes `{name}`, which is a graph input"))
            } else if outputs.contains(&Some(id)) {
                Some(format!("writes `{name}` twice"))
            } else {
                None
            };
            if let Some(message) = clash {
                return Err(OnnxError::invalid(file, label, message));
            }
            outputs.push(Some(id));
        }
        graph.add_operation(op, &inputs, &outputs).map_err(graph_err)?;
    }

    for vi in &g.output {
        let id = declare(&mut graph, vi);
        graph.add_graph_output(id).map_err(graph_err)?;
    }
    for vi in &g.value_info {
        declare(&mut graph, vi);
    }
    check_defined(&graph, g, file, outer)?;
    graph.topological_order().map_err(graph_err)?;
    Ok(graph)
}

/// Every name a node or graph output reads must be produced, an initializer, a graph input, or
/// visible from an enclosing graph.
fn check_defined(graph: &Graph, g: &GraphProto, file: &str, outer: &HashSet<String>) -> Result<()> {
    let defined = |name: &str| {
        outer.contains(name)
            || graph.var_id(name).is_some_and(|id| {
                graph.producer(id).is_some()
                    || graph.is_graph_input(id)
                    || graph.variable(id).is_ok_and(|v| v.is_parameter())
            })
    };
    for (index, node) in g.node.iter().enumerate() {
        if let Some(missing) = node.input.iter().find(|n| !n.is_empty() && !defined(n)) {
            return Err(OnnxError::invalid(
                file,
                node_label(node, index),
                format!("reads `{missing}`, which no node, graph input or initializer provides"),
            ));
        }
    }
    // A nameless graph input or output names no tensor (a damaged file): refused, or it would
    // become a variable called "" that the export writes and no loader accepts.
    for (what, list) in [("input", &g.input), ("output", &g.output)] {
        if let Some(i) = list.iter().position(|v| v.name.as_deref().is_none_or(str::is_empty)) {
            return Err(OnnxError::invalid(file, format!("graph {what} {i}"), "has no name"));
        }
    }
    if let Some(missing) = g.output.iter().filter_map(|o| o.name.as_deref()).find(|n| !defined(n)) {
        return Err(OnnxError::invalid(file, format!("graph output `{missing}`"), "is not produced by any node"));
    }
    Ok(())
}
