//! Test-data values (`input_K.pb` / `output_K.pb` of the ONNX backend tests): a `TensorProto`, a
//! `SequenceProto` or an `OptionalProto`, decoded into a [`DataValue`] by the declared type.

use crate::error::{OnnxError, Result};
use crate::proto::{OptionalProto, SequenceProto, TensorProto};
use crate::tensor::{Source, tensor_from_proto};
use mppq_ir::{TensorData, ValueType};
use prost::Message;
use std::path::Path;

/// A decoded test value.
#[derive(Clone, Debug, PartialEq)]
pub enum DataValue {
    Tensor(TensorData),
    Sequence(Vec<DataValue>),
    Optional(Option<Box<DataValue>>),
}

/// `SequenceProto.DataType` / `OptionalProto.DataType` codes.
const ELEM_TENSOR: i32 = 1;
const ELEM_SEQUENCE: i32 = 3;
const ELEM_OPTIONAL: i32 = 5;

/// Decodes a value file. `kind` is the declared type of the graph input or output it belongs to:
/// a sequence type expects a `SequenceProto`, an optional type an `OptionalProto`, anything else
/// (or no declared type) a `TensorProto`.
pub fn decode_value_file(path: impl AsRef<Path>, kind: Option<&ValueType>) -> Result<DataValue> {
    let path = path.as_ref();
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Read { path: label.clone(), source })?;
    let src = Source { file: &label, base_dir: path.parent() };
    let decode_err = |source| OnnxError::Decode { file: label.clone(), source };
    match kind {
        Some(ValueType::Sequence(_)) => {
            let p = SequenceProto::decode(bytes.as_slice()).map_err(decode_err)?;
            sequence(&p, &src)
        }
        Some(ValueType::Optional(_)) => {
            let p = OptionalProto::decode(bytes.as_slice()).map_err(decode_err)?;
            optional(&p, &src)
        }
        _ => {
            let p = TensorProto::decode(bytes.as_slice()).map_err(decode_err)?;
            tensor(&p, &src)
        }
    }
}

fn tensor(p: &TensorProto, src: &Source<'_>) -> Result<DataValue> {
    Ok(DataValue::Tensor(tensor_from_proto(p, src, "tensor")?))
}

fn sequence(p: &SequenceProto, src: &Source<'_>) -> Result<DataValue> {
    let invalid = |m: String| OnnxError::invalid(src.file, "sequence", m);
    if !p.sparse_tensor_values.is_empty() || !p.map_values.is_empty() {
        return Err(invalid("sparse-tensor and map elements are not supported".into()));
    }
    // The element type picks the field; without one, the (only) non-empty field is used.
    let elem = p.elem_type.unwrap_or(0);
    let pick = match elem {
        0 if !p.sequence_values.is_empty() => ELEM_SEQUENCE,
        0 if !p.optional_values.is_empty() => ELEM_OPTIONAL,
        0 => ELEM_TENSOR,
        e => e,
    };
    let items = match pick {
        ELEM_TENSOR => p.tensor_values.iter().map(|t| tensor(t, src)).collect::<Result<Vec<_>>>()?,
        ELEM_SEQUENCE => p.sequence_values.iter().map(|s| sequence(s, src)).collect::<Result<Vec<_>>>()?,
        ELEM_OPTIONAL => p.optional_values.iter().map(|o| optional(o, src)).collect::<Result<Vec<_>>>()?,
        e => return Err(invalid(format!("unsupported element type {e}"))),
    };
    Ok(DataValue::Sequence(items))
}

fn optional(p: &OptionalProto, src: &Source<'_>) -> Result<DataValue> {
    let invalid = |m: String| OnnxError::invalid(src.file, "optional", m);
    if p.sparse_tensor_value.is_some() || p.map_value.is_some() {
        return Err(invalid("sparse-tensor and map values are not supported".into()));
    }
    let inner = if let Some(t) = &p.tensor_value {
        Some(tensor(t, src)?)
    } else if let Some(s) = &p.sequence_value {
        Some(sequence(s, src)?)
    } else if let Some(o) = &p.optional_value {
        Some(optional(o, src)?)
    } else {
        None
    };
    Ok(DataValue::Optional(inner.map(Box::new)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::TensorProto;

    fn float_tensor(v: &[f32]) -> TensorProto {
        TensorProto { dims: vec![v.len() as i64], data_type: Some(1), float_data: v.to_vec(), ..Default::default() }
    }

    #[test]
    fn decodes_sequences_and_optionals_by_declared_type() {
        let dir = std::env::temp_dir().join(format!("mppq_test_data_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seq = SequenceProto {
            elem_type: Some(1),
            tensor_values: vec![float_tensor(&[1.0]), float_tensor(&[2.0, 3.0])],
            ..Default::default()
        };
        let seq_path = dir.join("seq.pb");
        std::fs::write(&seq_path, seq.encode_to_vec()).unwrap();
        let got = decode_value_file(&seq_path, Some(&ValueType::Sequence(None))).unwrap();
        let DataValue::Sequence(items) = got else { panic!("not a sequence") };
        assert_eq!(items.len(), 2);

        let empty = OptionalProto { elem_type: Some(1), ..Default::default() };
        let opt_path = dir.join("opt.pb");
        std::fs::write(&opt_path, empty.encode_to_vec()).unwrap();
        assert_eq!(decode_value_file(&opt_path, Some(&ValueType::Optional(None))).unwrap(), DataValue::Optional(None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
