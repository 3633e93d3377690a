//! ONNX element types: every `TensorProto.DataType`, with its wire code and storage width.

use serde::{Deserialize, Serialize};

/// An ONNX tensor element type. Every type ONNX defines is representable (and storable); which
/// ones an executor computes with is that executor's business.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataType {
    Float,
    Uint8,
    Int8,
    Uint16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Double,
    Uint32,
    Uint64,
    Complex64,
    Complex128,
    BFloat16,
    Float8E4M3FN,
    Float8E4M3FNUZ,
    Float8E5M2,
    Float8E5M2FNUZ,
    Uint4,
    Int4,
    Float4E2M1,
    Float8E8M0,
    Uint2,
    Int2,
}

/// How many bits one element occupies in packed little-endian storage (`raw_data`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementWidth {
    /// Whole bytes per element.
    Bytes(usize),
    /// Sub-byte elements, packed low bits first (4-bit: two per byte, 2-bit: four per byte).
    Bits(usize),
    /// Variable-length strings; not stored as packed bytes.
    Variable,
}

impl DataType {
    /// All types, in ONNX code order.
    pub const ALL: [DataType; 26] = [
        DataType::Float,
        DataType::Uint8,
        DataType::Int8,
        DataType::Uint16,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::String,
        DataType::Bool,
        DataType::Float16,
        DataType::Double,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Complex64,
        DataType::Complex128,
        DataType::BFloat16,
        DataType::Float8E4M3FN,
        DataType::Float8E4M3FNUZ,
        DataType::Float8E5M2,
        DataType::Float8E5M2FNUZ,
        DataType::Uint4,
        DataType::Int4,
        DataType::Float4E2M1,
        DataType::Float8E8M0,
        DataType::Uint2,
        DataType::Int2,
    ];

    /// The `TensorProto.DataType` code (FLOAT = 1 … INT2 = 26).
    pub fn onnx_code(self) -> i32 {
        // ALL is in code order starting at 1.
        Self::ALL.iter().position(|d| *d == self).map_or(0, |i| i as i32 + 1)
    }

    /// The type for an ONNX code; `None` for 0 (UNDEFINED) and unknown codes.
    pub fn from_onnx_code(code: i32) -> Option<DataType> {
        if code < 1 {
            return None;
        }
        Self::ALL.get(code as usize - 1).copied()
    }

    /// The ONNX spelling, e.g. `FLOAT16`.
    pub fn onnx_name(self) -> &'static str {
        match self {
            DataType::Float => "FLOAT",
            DataType::Uint8 => "UINT8",
            DataType::Int8 => "INT8",
            DataType::Uint16 => "UINT16",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::String => "STRING",
            DataType::Bool => "BOOL",
            DataType::Float16 => "FLOAT16",
            DataType::Double => "DOUBLE",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Complex64 => "COMPLEX64",
            DataType::Complex128 => "COMPLEX128",
            DataType::BFloat16 => "BFLOAT16",
            DataType::Float8E4M3FN => "FLOAT8E4M3FN",
            DataType::Float8E4M3FNUZ => "FLOAT8E4M3FNUZ",
            DataType::Float8E5M2 => "FLOAT8E5M2",
            DataType::Float8E5M2FNUZ => "FLOAT8E5M2FNUZ",
            DataType::Uint4 => "UINT4",
            DataType::Int4 => "INT4",
            DataType::Float4E2M1 => "FLOAT4E2M1",
            DataType::Float8E8M0 => "FLOAT8E8M0",
            DataType::Uint2 => "UINT2",
            DataType::Int2 => "INT2",
        }
    }

    /// Storage width of one element in `raw_data` layout.
    pub fn width(self) -> ElementWidth {
        use DataType::*;
        match self {
            Bool | Uint8 | Int8 | Float8E4M3FN | Float8E4M3FNUZ | Float8E5M2 | Float8E5M2FNUZ | Float8E8M0 => {
                ElementWidth::Bytes(1)
            }
            Uint16 | Int16 | Float16 | BFloat16 => ElementWidth::Bytes(2),
            Float | Int32 | Uint32 => ElementWidth::Bytes(4),
            Double | Int64 | Uint64 | Complex64 => ElementWidth::Bytes(8),
            Complex128 => ElementWidth::Bytes(16),
            Uint4 | Int4 | Float4E2M1 => ElementWidth::Bits(4),
            Uint2 | Int2 => ElementWidth::Bits(2),
            String => ElementWidth::Variable,
        }
    }

    /// Bytes needed to store `count` elements packed; `None` for strings.
    pub fn packed_len(self, count: usize) -> Option<usize> {
        match self.width() {
            ElementWidth::Bytes(b) => count.checked_mul(b),
            ElementWidth::Bits(bits) => count.checked_mul(bits).map(|n| n.div_ceil(8)),
            ElementWidth::Variable => None,
        }
    }

    pub fn is_float(self) -> bool {
        use DataType::*;
        matches!(
            self,
            Float
                | Double
                | Float16
                | BFloat16
                | Float8E4M3FN
                | Float8E4M3FNUZ
                | Float8E5M2
                | Float8E5M2FNUZ
                | Float4E2M1
                | Float8E8M0
        )
    }

    pub fn is_integer(self) -> bool {
        use DataType::*;
        matches!(self, Uint8 | Int8 | Uint16 | Int16 | Int32 | Int64 | Uint32 | Uint64 | Uint4 | Int4 | Uint2 | Int2)
    }

    pub fn is_signed_integer(self) -> bool {
        use DataType::*;
        matches!(self, Int8 | Int16 | Int32 | Int64 | Int4 | Int2)
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.onnx_name().to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_onnx() {
        for dt in DataType::ALL {
            assert_eq!(DataType::from_onnx_code(dt.onnx_code()), Some(dt));
        }
        assert_eq!(DataType::Float.onnx_code(), 1);
        assert_eq!(DataType::Int64.onnx_code(), 7);
        assert_eq!(DataType::BFloat16.onnx_code(), 16);
        assert_eq!(DataType::Int4.onnx_code(), 22);
        assert_eq!(DataType::Int2.onnx_code(), 26);
        assert_eq!(DataType::from_onnx_code(0), None);
        assert_eq!(DataType::from_onnx_code(27), None);
    }

    #[test]
    fn packed_lengths() {
        assert_eq!(DataType::Float.packed_len(3), Some(12));
        assert_eq!(DataType::Int4.packed_len(3), Some(2));
        assert_eq!(DataType::Uint2.packed_len(5), Some(2));
        assert_eq!(DataType::String.packed_len(1), None);
    }
}
