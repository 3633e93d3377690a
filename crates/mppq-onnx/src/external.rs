//! External tensor data (`data_location = EXTERNAL`): reading a tensor's bytes from a file
//! beside the model, and the key/value entries that describe where a tensor was written.

use crate::error::{OnnxError, Result};
use crate::proto::{StringStringEntryProto, TensorProto};
use crate::tensor::Source;
use mppq_ir::DataType;
use std::io::{Read, Seek, SeekFrom};

fn entry<'a>(t: &'a TensorProto, key: &str) -> Option<&'a str> {
    t.external_data.iter().find(|e| e.key.as_deref() == Some(key)).and_then(|e| e.value.as_deref())
}

/// Reads the bytes of an external tensor. The location must be a file inside the model's directory
/// ([`crate::confine::confined_file`]); offset and length must lie inside the file and match the tensor size.
pub fn read_tensor_bytes(
    t: &TensorProto,
    dtype: DataType,
    count: usize,
    src: &Source<'_>,
    place: &str,
) -> Result<Vec<u8>> {
    let tensor = t.name.clone().unwrap_or_else(|| place.to_string());
    let fail = |m: String| OnnxError::ExternalData { file: src.file.to_string(), tensor: tensor.clone(), message: m };
    let location = entry(t, "location").ok_or_else(|| fail("no `location` key".into()))?;
    let base =
        src.base_dir.ok_or_else(|| fail("model was loaded from bytes, so external files cannot be found".into()))?;
    let path = crate::confine::confined_file(base, location).map_err(fail)?;
    let parse = |key: &str| -> Result<Option<u64>> {
        entry(t, key).map(|v| v.parse::<u64>().map_err(|_| fail(format!("`{key}` is not a number: `{v}`")))).transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let expected = dtype.packed_len(count).ok_or_else(|| fail("string tensors cannot be external".into()))? as u64;
    let length = parse("length")?.unwrap_or(expected);
    if length != expected {
        return Err(fail(format!("length {length} but a {dtype} tensor of {count} elements needs {expected} bytes")));
    }
    let mut file = std::fs::File::open(&path).map_err(|e| fail(format!("cannot open `{}`: {e}", path.display())))?;
    let size = file.metadata().map_err(|e| fail(e.to_string()))?.len();
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(fail(format!(
            "bytes {offset}..{} lie outside `{location}` ({size} bytes)",
            offset.saturating_add(length)
        )));
    }
    file.seek(SeekFrom::Start(offset)).map_err(|e| fail(e.to_string()))?;
    let mut bytes = vec![0u8; length as usize];
    file.read_exact(&mut bytes).map_err(|e| fail(e.to_string()))?;
    Ok(bytes)
}

/// The `external_data` entries for a tensor stored at `offset` in `location`.
pub fn entries(location: &str, offset: u64, length: u64) -> Vec<StringStringEntryProto> {
    [("location", location.to_string()), ("offset", offset.to_string()), ("length", length.to_string())]
        .into_iter()
        .map(|(k, v)| StringStringEntryProto { key: Some(k.into()), value: Some(v) })
        .collect()
}
