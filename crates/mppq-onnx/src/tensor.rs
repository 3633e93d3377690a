//! `TensorProto` ⇄ [`TensorData`]: every element type from `raw_data`, the typed fields or
//! external data on the way in; always `raw_data` (or `string_data`) on the way out.

use crate::error::{OnnxError, Result};
use crate::external;
use crate::proto::{TensorProto, tensor_proto::DataLocation};
use mppq_ir::dtype::ElementWidth;
use mppq_ir::tensor::element_count;
use mppq_ir::{DataType, TensorData};
use std::path::Path;

/// Where a tensor comes from, for locating external data and naming the file in errors.
pub struct Source<'a> {
    pub file: &'a str,
    pub base_dir: Option<&'a Path>,
}

/// Decodes a tensor; `place` names it in errors (e.g. "initializer `conv1.weight`").
pub fn tensor_from_proto(t: &TensorProto, src: &Source<'_>, place: &str) -> Result<TensorData> {
    let invalid = |m: String| OnnxError::invalid(src.file, place, m);
    let code = t.data_type.unwrap_or(0);
    let dtype =
        DataType::from_onnx_code(code).ok_or_else(|| invalid(format!("unknown or undefined data type {code}")))?;
    let shape = t
        .dims
        .iter()
        .map(|d| usize::try_from(*d).map_err(|_| invalid(format!("negative dimension {d} in {:?}", t.dims))))
        .collect::<Result<Vec<_>>>()?;
    let count = element_count(&shape).map_err(|e| invalid(e.to_string()))?;
    let to_tensor = |r: mppq_ir::Result<TensorData>| r.map_err(|e| invalid(e.to_string()));

    if t.data_location == Some(DataLocation::External as i32) {
        let bytes = external::read_tensor_bytes(t, dtype, count, src, place)?;
        return to_tensor(TensorData::from_packed(dtype, shape, bytes));
    }
    if dtype == DataType::String {
        return to_tensor(TensorData::from_strings(shape, t.string_data.clone()));
    }
    if let Some(raw) = &t.raw_data {
        return to_tensor(TensorData::from_packed(dtype, shape, raw.clone()));
    }
    let bytes = typed_fields_to_bytes(t, dtype, count).map_err(invalid)?;
    to_tensor(TensorData::from_packed(dtype, shape, bytes))
}

/// Repacks the typed repeated fields into the `raw_data` layout.
fn typed_fields_to_bytes(t: &TensorProto, dtype: DataType, count: usize) -> Result<Vec<u8>, String> {
    use DataType::*;
    let mut out = Vec::new();
    let expect = |have: usize, want: usize, field: &str| {
        if have == want {
            Ok(())
        } else {
            Err(format!("{dtype} tensor of {count} elements has {have} values in {field}, expected {want}"))
        }
    };
    match dtype {
        Float | Complex64 => {
            expect(t.float_data.len(), if dtype == Float { count } else { count * 2 }, "float_data")?;
            t.float_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        Double | Complex128 => {
            expect(t.double_data.len(), if dtype == Double { count } else { count * 2 }, "double_data")?;
            t.double_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        Int64 => {
            expect(t.int64_data.len(), count, "int64_data")?;
            t.int64_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        Uint32 | Uint64 => {
            expect(t.uint64_data.len(), count, "uint64_data")?;
            for v in &t.uint64_data {
                if dtype == Uint32 {
                    out.extend_from_slice(&(*v as u32).to_le_bytes());
                } else {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        String => return Err("string tensors use string_data".into()),
        _ => match dtype.width() {
            // int32_data holds one element per entry, or one packed byte for sub-byte types.
            ElementWidth::Bytes(width) => {
                expect(t.int32_data.len(), count, "int32_data")?;
                for v in &t.int32_data {
                    out.extend_from_slice(&v.to_le_bytes()[..width]);
                }
            }
            ElementWidth::Bits(bits) => {
                expect(t.int32_data.len(), (count * bits).div_ceil(8), "int32_data")?;
                out.extend(t.int32_data.iter().map(|v| *v as u8));
            }
            ElementWidth::Variable => return Err("variable-width type".into()),
        },
    }
    Ok(out)
}

/// Encodes a tensor with `raw_data` (strings in `string_data`).
pub fn tensor_to_proto(name: &str, t: &TensorData) -> TensorProto {
    let mut p = TensorProto {
        dims: t.shape().iter().map(|d| *d as i64).collect(),
        data_type: Some(t.dtype().onnx_code()),
        ..Default::default()
    };
    if !name.is_empty() {
        p.name = Some(name.to_string());
    }
    match t.strings() {
        Some(s) => p.string_data = s.to_vec(),
        None => p.raw_data = Some(t.packed().unwrap_or_default().to_vec()),
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> Source<'static> {
        Source { file: "t.onnx", base_dir: None }
    }

    #[test]
    fn typed_fields_decode_like_raw_data() {
        let f16_bits = [0x3c00i32, 0xc000]; // 1.0, -2.0
        let t = TensorProto { dims: vec![2], data_type: Some(10), int32_data: f16_bits.to_vec(), ..Default::default() };
        let d = tensor_from_proto(&t, &src(), "x").unwrap();
        assert_eq!(d.dtype(), DataType::Float16);
        assert_eq!(d.to_f32_vec().unwrap(), vec![1.0, -2.0]);

        let t = TensorProto { dims: vec![3], data_type: Some(22), int32_data: vec![0x87, 0x01], ..Default::default() };
        assert_eq!(tensor_from_proto(&t, &src(), "x").unwrap().to_i64_vec().unwrap(), vec![7, -8, 1]);

        let t = TensorProto {
            dims: vec![2],
            data_type: Some(12),
            uint64_data: vec![1, 4_000_000_000],
            ..Default::default()
        };
        assert_eq!(tensor_from_proto(&t, &src(), "x").unwrap().to_i64_vec().unwrap(), vec![1, 4_000_000_000]);
    }

    #[test]
    fn wrong_counts_and_types_are_errors() {
        let t = TensorProto { dims: vec![3], data_type: Some(1), float_data: vec![1.0], ..Default::default() };
        let e = tensor_from_proto(&t, &src(), "initializer `w`").unwrap_err().to_string();
        assert!(e.contains("initializer `w`") && e.contains("float_data"), "{e}");
        let t = TensorProto { dims: vec![1], data_type: Some(99), ..Default::default() };
        assert!(tensor_from_proto(&t, &src(), "x").is_err());
        let t = TensorProto { dims: vec![-1], data_type: Some(1), ..Default::default() };
        assert!(tensor_from_proto(&t, &src(), "x").unwrap_err().to_string().contains("negative"));
    }

    #[test]
    fn round_trip_through_raw_data() {
        let d = TensorData::from_vec(vec![2, 2], &[1i64, -2, 3, 4]).unwrap();
        let back = tensor_from_proto(&tensor_to_proto("x", &d), &src(), "x").unwrap();
        assert_eq!(back, d);
    }
}
