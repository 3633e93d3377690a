//! Saving: [`Model`] → ONNX bytes or files. Files are written atomically (a temporary file in
//! the target directory, renamed into place), so a failed save never leaves a half-written
//! model and never destroys the previous one. Large models put initializers in an external
//! data file, since a protobuf message cannot exceed 2 GiB.

use crate::attribute::{attribute_to_proto, sparse_to_proto};
use crate::error::{OnnxError, Result};
use crate::external;
use crate::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto, ValueInfoProto,
    tensor_proto::DataLocation,
};
use crate::tensor::tensor_to_proto;
use crate::value_type::value_type_to_proto;
use mppq_ir::{Graph, Model, TensorData};
use prost::Message;
use std::io::Write;
use std::path::Path;

/// Whether initializers go to an external data file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExternalData {
    /// External only when the model would not fit in one protobuf (over 1.75 GiB of tensors).
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Clone, Debug)]
pub struct SaveOptions {
    pub external_data: ExternalData,
    /// Tensors smaller than this many bytes stay inline even when data goes external.
    pub size_threshold: usize,
}

impl Default for SaveOptions {
    fn default() -> Self {
        Self { external_data: ExternalData::Auto, size_threshold: 1024 }
    }
}

/// Above this many bytes of initializers, `Auto` writes external data (protobuf's hard limit
/// is 2 GiB for the whole message).
const AUTO_EXTERNAL_BYTES: usize = 1792 << 20;

/// Encodes a model in one buffer (no external data).
pub fn model_to_bytes(model: &Model) -> Result<Vec<u8>> {
    let proto = model_to_proto(model, &mut |name, t| Ok(tensor_to_proto(name, t)))?;
    if proto.encoded_len() > i32::MAX as usize {
        return Err(OnnxError::Write {
            path: "<memory>".into(),
            message: "model exceeds the 2 GiB protobuf limit; save it to a file with external data".into(),
        });
    }
    Ok(proto.encode_to_vec())
}

/// Saves `model` to `path` atomically; with external data, tensors go to `<file stem>.data`
/// beside it (also written atomically, before the model that refers to it).
pub fn save_model(model: &Model, path: impl AsRef<Path>, options: &SaveOptions) -> Result<()> {
    let path = path.as_ref();
    let label = path.display().to_string();
    let write_err = |m: String| OnnxError::Write { path: label.clone(), message: m };
    let total: usize = model.graph.initializers().filter_map(|(_, v)| v.value.as_ref()).map(TensorData::byte_len).sum();
    let external = match options.external_data {
        ExternalData::Always => true,
        ExternalData::Never => false,
        ExternalData::Auto => total > AUTO_EXTERNAL_BYTES,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let proto = if external {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        let location = format!("{stem}.data");
        let mut data = tempfile::NamedTempFile::new_in(&dir).map_err(|e| write_err(e.to_string()))?;
        let mut offset = 0u64;
        let proto = {
            let file = data.as_file_mut();
            let mut writer = std::io::BufWriter::new(file);
            let proto = model_to_proto(model, &mut |name, t| {
                let bytes = match t.packed() {
                    Some(b) if b.len() >= options.size_threshold => b,
                    _ => return Ok(tensor_to_proto(name, t)),
                };
                // Align each tensor to 64 bytes so readers can map it directly.
                let pad = (64 - offset % 64) % 64;
                writer.write_all(&vec![0u8; pad as usize]).map_err(|e| write_err(e.to_string()))?;
                offset += pad;
                writer.write_all(bytes).map_err(|e| write_err(e.to_string()))?;
                let mut p = tensor_to_proto(name, &TensorData::scalar(0u8));
                p.dims = t.shape().iter().map(|d| *d as i64).collect();
                p.data_type = Some(t.dtype().onnx_code());
                p.raw_data = None;
                p.data_location = Some(DataLocation::External as i32);
                p.external_data = external::entries(&location, offset, bytes.len() as u64);
                offset += bytes.len() as u64;
                Ok(p)
            })?;
            writer.flush().map_err(|e| write_err(e.to_string()))?;
            proto
        };
        data.as_file().sync_all().map_err(|e| write_err(e.to_string()))?;
        data.persist(dir.join(&location)).map_err(|e| write_err(e.to_string()))?;
        proto
    } else {
        model_to_proto(model, &mut |name, t| Ok(tensor_to_proto(name, t)))?
    };
    if proto.encoded_len() > i32::MAX as usize {
        return Err(write_err("model exceeds the 2 GiB protobuf limit; use external data".into()));
    }
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| write_err(e.to_string()))?;
    tmp.write_all(&proto.encode_to_vec()).map_err(|e| write_err(e.to_string()))?;
    tmp.as_file().sync_all().map_err(|e| write_err(e.to_string()))?;
    tmp.persist(path).map_err(|e| write_err(e.to_string()))?;
    Ok(())
}

type InitializerEncoder<'a> = dyn FnMut(&str, &TensorData) -> Result<TensorProto> + 'a;

fn model_to_proto(model: &Model, encode: &mut InitializerEncoder<'_>) -> Result<ModelProto> {
    let decode_opaque = |bytes: &Vec<u8>, what: &str| OnnxError::Write {
        path: "<model>".into(),
        message: format!("stored {what} does not decode: {bytes:?}"),
    };
    Ok(ModelProto {
        ir_version: Some(model.ir_version),
        opset_import: model
            .opset_imports
            .iter()
            .map(|(d, v)| OperatorSetIdProto { domain: Some(d.clone()), version: Some(*v) })
            .collect(),
        producer_name: Some(model.producer_name.clone()),
        producer_version: Some(model.producer_version.clone()),
        domain: Some(model.domain.clone()),
        model_version: Some(model.model_version),
        doc_string: Some(model.doc_string.clone()),
        graph: Some(graph_to_proto_with(&model.graph, encode)?),
        metadata_props: model
            .metadata
            .iter()
            .map(|(k, v)| StringStringEntryProto { key: Some(k.clone()), value: Some(v.clone()) })
            .collect(),
        functions: model
            .functions
            .iter()
            .map(|b| Message::decode(b.as_slice()).map_err(|_| decode_opaque(b, "function")))
            .collect::<Result<_>>()?,
        training_info: model
            .training_info
            .iter()
            .map(|b| Message::decode(b.as_slice()).map_err(|_| decode_opaque(b, "training info")))
            .collect::<Result<_>>()?,
        configuration: Vec::new(),
    })
}

/// Encodes a graph with every tensor inline (used for sub-graphs).
pub(crate) fn graph_to_proto(g: &Graph) -> GraphProto {
    let mut inline = |name: &str, t: &TensorData| Ok(tensor_to_proto(name, t));
    // Inline encoding cannot fail.
    graph_to_proto_with(g, &mut inline).unwrap_or_default()
}

fn graph_to_proto_with(g: &Graph, encode: &mut InitializerEncoder<'_>) -> Result<GraphProto> {
    let value_info = |id| {
        let v = g.variable(id).ok();
        ValueInfoProto {
            name: v.map(|v| v.name.clone()),
            r#type: v.and_then(|v| v.ty.as_ref()).map(value_type_to_proto),
            doc_string: v.map(|v| v.doc_string.clone()).filter(|d| !d.is_empty()),
            metadata_props: Vec::new(),
        }
    };
    // Nodes must be written in topological order; the IR's order keeps insertion order where
    // it is valid. A graph with a cycle is written as it is.
    let order = g.topological_order().unwrap_or_else(|_| g.operations().map(|(id, _)| id).collect());
    let name_of = |slot: &Option<mppq_ir::VarId>| slot.map(|id| g.var_name(id).to_string()).unwrap_or_default();
    let mut node = Vec::with_capacity(order.len());
    for id in order {
        let Ok(op) = g.operation(id) else { continue };
        node.push(NodeProto {
            input: op.inputs().iter().map(name_of).collect(),
            output: op.outputs().iter().map(name_of).collect(),
            name: Some(op.name.clone()).filter(|n| !n.is_empty()),
            op_type: Some(op.op_type.clone()),
            domain: Some(op.domain.clone()).filter(|d| !d.is_empty()),
            overload: None,
            attribute: op.attributes.iter().map(|(k, a)| attribute_to_proto(k, a)).collect(),
            doc_string: Some(op.doc_string.clone()).filter(|d| !d.is_empty()),
            metadata_props: Vec::new(),
            device_configurations: Vec::new(),
        });
    }
    let mut initializer = Vec::new();
    for (_, v) in g.initializers() {
        if let Some(t) = &v.value {
            initializer.push(encode(&v.name, t)?);
        }
    }
    Ok(GraphProto {
        node,
        name: Some(g.name.clone()),
        initializer,
        sparse_initializer: g.sparse_initializers.iter().map(|(n, s)| sparse_to_proto(n, s)).collect(),
        doc_string: Some(g.doc_string.clone()).filter(|d| !d.is_empty()),
        input: g.inputs().iter().map(|id| value_info(*id)).collect(),
        output: g.outputs().iter().map(|id| value_info(*id)).collect(),
        value_info: g
            .variables()
            .filter(|(id, v)| v.ty.is_some() && !g.is_graph_input(*id) && !g.is_graph_output(*id))
            .map(|(id, _)| value_info(id))
            .collect(),
        quantization_annotation: Vec::new(),
        metadata_props: Vec::new(),
    })
}
