//! Constant tensors (initializers, attribute tensors): an element type, a shape and the values,
//! stored exactly as ONNX's `raw_data` lays them out so nothing is lost or silently cast.

use crate::dtype::{DataType, ElementWidth};
use crate::error::{IrError, Result};
use crate::lowp;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// The values of a tensor: packed little-endian bytes for numeric types, or byte strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TensorBytes {
    Packed(Vec<u8>),
    Strings(Vec<Vec<u8>>),
}

/// A dense constant tensor. Invariant: the storage length matches `dtype` and `shape`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorData {
    dtype: DataType,
    shape: Vec<usize>,
    bytes: TensorBytes,
}

/// Element types with a native Rust representation, stored little-endian.
pub trait Element: Copy + 'static {
    const DTYPE: DataType;
    const SIZE: usize;
    fn write_le(self, out: &mut Vec<u8>);
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DataType = $dt;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut buf = [0u8; std::mem::size_of::<$t>()];
                buf.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(buf)
            }
        }
    };
}
element!(f32, DataType::Float);
element!(f64, DataType::Double);
element!(i8, DataType::Int8);
element!(u8, DataType::Uint8);
element!(i16, DataType::Int16);
element!(u16, DataType::Uint16);
element!(i32, DataType::Int32);
element!(u32, DataType::Uint32);
element!(i64, DataType::Int64);
element!(u64, DataType::Uint64);
element!(f16, DataType::Float16);
element!(bf16, DataType::BFloat16);

impl Element for bool {
    const DTYPE: DataType = DataType::Bool;
    const SIZE: usize = 1;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// Number of elements of a shape, or an error if it overflows `usize`.
pub fn element_count(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| IrError::InvalidTensor(format!("shape {shape:?} has too many elements")))
}

impl TensorData {
    /// A tensor from packed little-endian bytes (the `raw_data` layout).
    pub fn from_packed(dtype: DataType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Self> {
        let count = element_count(&shape)?;
        let expected = dtype
            .packed_len(count)
            .ok_or_else(|| IrError::InvalidTensor(format!("{dtype} tensors hold strings, not packed bytes")))?;
        if bytes.len() != expected {
            return Err(IrError::InvalidTensor(format!(
                "{dtype} tensor of shape {shape:?} needs {expected} bytes, got {}",
                bytes.len()
            )));
        }
        Ok(Self { dtype, shape, bytes: TensorBytes::Packed(bytes) })
    }

    /// A string tensor.
    pub fn from_strings(shape: Vec<usize>, strings: Vec<Vec<u8>>) -> Result<Self> {
        let count = element_count(&shape)?;
        if strings.len() != count {
            return Err(IrError::InvalidTensor(format!(
                "string tensor of shape {shape:?} needs {count} strings, got {}",
                strings.len()
            )));
        }
        Ok(Self { dtype: DataType::String, shape, bytes: TensorBytes::Strings(strings) })
    }

    /// A tensor from native values.
    pub fn from_vec<T: Element>(shape: Vec<usize>, values: &[T]) -> Result<Self> {
        let mut bytes = Vec::with_capacity(values.len() * T::SIZE);
        for v in values {
            v.write_le(&mut bytes);
        }
        Self::from_packed(T::DTYPE, shape, bytes)
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(value: T) -> Self {
        let mut bytes = Vec::with_capacity(T::SIZE);
        value.write_le(&mut bytes);
        Self { dtype: T::DTYPE, shape: Vec::new(), bytes: TensorBytes::Packed(bytes) }
    }

    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (the shape's product; 1 for a scalar).
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of storage (packed data, or the sum of string lengths).
    pub fn byte_len(&self) -> usize {
        match &self.bytes {
            TensorBytes::Packed(b) => b.len(),
            TensorBytes::Strings(s) => s.iter().map(Vec::len).sum(),
        }
    }

    pub fn bytes(&self) -> &TensorBytes {
        &self.bytes
    }

    /// The packed bytes, `None` for string tensors.
    pub fn packed(&self) -> Option<&[u8]> {
        match &self.bytes {
            TensorBytes::Packed(b) => Some(b),
            TensorBytes::Strings(_) => None,
        }
    }

    pub fn strings(&self) -> Option<&[Vec<u8>]> {
        match &self.bytes {
            TensorBytes::Strings(s) => Some(s),
            TensorBytes::Packed(_) => None,
        }
    }

    /// Same values, new shape with the same element count.
    pub fn reshaped(mut self, shape: Vec<usize>) -> Result<Self> {
        if element_count(&shape)? != self.len() {
            return Err(IrError::InvalidTensor(format!("cannot reshape {:?} to {shape:?}", self.shape)));
        }
        self.shape = shape;
        Ok(self)
    }

    /// The values as `T`, which must be exactly the stored type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(IrError::DTypeMismatch { expected: T::DTYPE, got: self.dtype });
        }
        let bytes = self.packed().unwrap_or(&[]);
        Ok(bytes.chunks_exact(T::SIZE).map(T::read_le).collect())
    }

    /// The values widened to f32, from any float type (FP8, FP4 and E8M0 codes decoded: every
    /// value of theirs is exact in f32).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        match self.dtype {
            DataType::Float => self.to_vec::<f32>(),
            DataType::Double => Ok(self.to_vec::<f64>()?.into_iter().map(|v| v as f32).collect()),
            DataType::Float16 => Ok(self.to_vec::<f16>()?.into_iter().map(f32::from).collect()),
            DataType::BFloat16 => Ok(self.to_vec::<bf16>()?.into_iter().map(f32::from).collect()),
            DataType::Float8E8M0 => Ok(self.packed().unwrap_or(&[]).iter().map(|c| lowp::e8m0_decode(*c)).collect()),
            other => match lowp::MiniFloat::of(other) {
                Some(fmt) => Ok(self.sub_byte_codes(fmt.bits() as usize).into_iter().map(|c| fmt.decode(c)).collect()),
                None => Err(IrError::DTypeMismatch { expected: DataType::Float, got: other }),
            },
        }
    }

    /// A tensor of an FP8, FP4 or E8M0 type from f32 values, each rounded to its nearest code
    /// (ties to even; E8M0 ties up). Out-of-range values become what ONNX's non-saturating
    /// Cast gives (±∞ or NaN; FP4 saturates), so values of the type itself, ±∞ included, keep
    /// their exact code.
    pub fn from_f32_codes(dtype: DataType, shape: Vec<usize>, values: &[f32]) -> Result<Self> {
        let bytes = if dtype == DataType::Float8E8M0 {
            values.iter().map(|v| lowp::e8m0_encode(*v, false, lowp::E8M0Rounding::Nearest)).collect()
        } else {
            let fmt = lowp::MiniFloat::of(dtype)
                .ok_or(IrError::DTypeMismatch { expected: DataType::Float8E4M3FN, got: dtype })?;
            let codes: Vec<i64> = values.iter().map(|v| i64::from(fmt.encode(*v, false))).collect();
            if fmt.bits() == 8 {
                codes.iter().map(|c| *c as u8).collect()
            } else {
                lowp::pack_sub_byte(fmt.bits(), &codes)
            }
        };
        Self::from_packed(dtype, shape, bytes)
    }

    /// A tensor of any float type from f32 values (rounded to nearest, ties to even): what
    /// passes use to write a changed parameter back in its own element type.
    pub fn from_f32_as(dtype: DataType, shape: Vec<usize>, values: &[f32]) -> Result<Self> {
        match dtype {
            DataType::Float => Self::from_vec(shape, values),
            DataType::Double => Self::from_vec(shape, &values.iter().map(|v| f64::from(*v)).collect::<Vec<_>>()),
            DataType::Float16 => Self::from_vec(shape, &values.iter().map(|v| f16::from_f32(*v)).collect::<Vec<_>>()),
            DataType::BFloat16 => Self::from_vec(shape, &values.iter().map(|v| bf16::from_f32(*v)).collect::<Vec<_>>()),
            _ => Self::from_f32_codes(dtype, shape, values),
        }
    }

    /// A tensor of a 4- or 2-bit integer type from values wrapped into its width (two's
    /// complement, as ONNX's Cast between fixed-point types), packed low bits first.
    pub fn from_i64_sub_byte(dtype: DataType, shape: Vec<usize>, values: &[i64]) -> Result<Self> {
        let (bits, _) =
            lowp::sub_byte_int(dtype).ok_or(IrError::DTypeMismatch { expected: DataType::Int4, got: dtype })?;
        Self::from_packed(dtype, shape, lowp::pack_sub_byte(bits, values))
    }

    /// Integer values widened to i64 (bool as 0/1, sub-byte types unpacked).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        use DataType::*;
        Ok(match self.dtype {
            Int64 => self.to_vec::<i64>()?,
            Int32 => self.to_vec::<i32>()?.into_iter().map(i64::from).collect(),
            Int16 => self.to_vec::<i16>()?.into_iter().map(i64::from).collect(),
            Int8 => self.to_vec::<i8>()?.into_iter().map(i64::from).collect(),
            Uint8 => self.to_vec::<u8>()?.into_iter().map(i64::from).collect(),
            Uint16 => self.to_vec::<u16>()?.into_iter().map(i64::from).collect(),
            Uint32 => self.to_vec::<u32>()?.into_iter().map(i64::from).collect(),
            Uint64 => self.to_vec::<u64>()?.into_iter().map(|v| v as i64).collect(),
            Bool => self.to_vec::<bool>()?.into_iter().map(i64::from).collect(),
            Int4 | Uint4 | Int2 | Uint2 => self.unpack_sub_byte(),
            other => return Err(IrError::DTypeMismatch { expected: Int64, got: other }),
        })
    }

    fn unpack_sub_byte(&self) -> Vec<i64> {
        let ElementWidth::Bits(bits) = self.dtype.width() else {
            return Vec::new();
        };
        let signed = self.dtype.is_signed_integer();
        self.sub_byte_codes(bits).into_iter().map(|c| lowp::wrap_int(i64::from(c), bits as u32, signed)).collect()
    }

    /// The raw codes of a type `bits` wide (8: the bytes; 4 or 2: unpacked, low bits first).
    fn sub_byte_codes(&self, bits: usize) -> Vec<u8> {
        let bytes = self.packed().unwrap_or(&[]);
        if bits == 8 {
            return bytes.to_vec();
        }
        let per_byte = 8 / bits;
        let mask = ((1u32 << bits) - 1) as u8;
        (0..self.len()).filter_map(|i| bytes.get(i / per_byte).map(|b| (b >> ((i % per_byte) * bits)) & mask)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_round_trip_and_length_check() {
        let t = TensorData::from_vec(vec![2, 2], &[1.0f32, -2.0, 3.5, f32::NAN]).unwrap();
        let back = t.to_vec::<f32>().unwrap();
        assert_eq!(back[..3], [1.0, -2.0, 3.5]);
        assert!(back[3].is_nan());
        assert!(TensorData::from_packed(DataType::Float, vec![3], vec![0; 8]).is_err());
        assert!(matches!(t.to_vec::<i64>(), Err(IrError::DTypeMismatch { .. })));
    }

    #[test]
    fn half_types_stay_half_and_widen() {
        let t = TensorData::from_vec(vec![2], &[f16::from_f32(1.5), f16::from_f32(-0.25)]).unwrap();
        assert_eq!(t.dtype(), DataType::Float16);
        assert_eq!(t.to_f32_vec().unwrap(), vec![1.5, -0.25]);
    }

    #[test]
    fn int4_unpacks_low_nibble_first_with_sign() {
        // elements: 7, -8, 1 packed as 0x87, 0x01
        let t = TensorData::from_packed(DataType::Int4, vec![3], vec![0x87, 0x01]).unwrap();
        assert_eq!(t.to_i64_vec().unwrap(), vec![7, -8, 1]);
    }

    #[test]
    fn low_precision_floats_decode_and_encode_exactly() {
        // FP8 E4M3FN: 1.0 = 0x38, -448 = 0xFE, NaN = 0x7F.
        let t = TensorData::from_packed(DataType::Float8E4M3FN, vec![3], vec![0x38, 0xFE, 0x7F]).unwrap();
        let v = t.to_f32_vec().unwrap();
        assert_eq!(v[..2], [1.0, -448.0]);
        assert!(v[2].is_nan());
        assert_eq!(TensorData::from_f32_codes(DataType::Float8E4M3FN, vec![3], &v).unwrap(), t);
        // FP4 E2M1, two per byte, low nibble first: 6.0 = 0x7, -0.5 = 0x9, 1.0 = 0x2.
        let t = TensorData::from_packed(DataType::Float4E2M1, vec![3], vec![0x97, 0x02]).unwrap();
        assert_eq!(t.to_f32_vec().unwrap(), vec![6.0, -0.5, 1.0]);
        assert_eq!(TensorData::from_f32_codes(DataType::Float4E2M1, vec![3], &[6.0, -0.5, 1.0]).unwrap(), t);
        // E8M0: 2^(code - 127).
        let t = TensorData::from_packed(DataType::Float8E8M0, vec![2], vec![127, 130]).unwrap();
        assert_eq!(t.to_f32_vec().unwrap(), vec![1.0, 8.0]);
        assert_eq!(TensorData::from_f32_codes(DataType::Float8E8M0, vec![2], &[1.0, 8.0]).unwrap(), t);
        assert!(TensorData::from_f32_codes(DataType::Float, vec![1], &[1.0]).is_err());
    }

    #[test]
    fn sub_byte_integers_pack_with_wrap() {
        let t = TensorData::from_i64_sub_byte(DataType::Int4, vec![3], &[7, -8, 17]).unwrap();
        assert_eq!(t.packed().unwrap(), &[0x87, 0x01]);
        assert_eq!(t.to_i64_vec().unwrap(), vec![7, -8, 1]);
        let t = TensorData::from_i64_sub_byte(DataType::Uint2, vec![5], &[1, 2, 3, 0, -1]).unwrap();
        assert_eq!(t.packed().unwrap(), &[0b00_11_10_01, 0b11]);
        assert_eq!(t.to_i64_vec().unwrap(), vec![1, 2, 3, 0, 3]);
        let t = TensorData::from_packed(DataType::Int2, vec![4], vec![0b10_11_01_00]).unwrap();
        assert_eq!(t.to_i64_vec().unwrap(), vec![0, 1, -1, -2]);
        assert!(TensorData::from_i64_sub_byte(DataType::Int8, vec![1], &[1]).is_err());
    }

    #[test]
    fn overflowing_shape_is_an_error() {
        assert!(TensorData::from_packed(DataType::Float, vec![usize::MAX, 2], vec![]).is_err());
    }
}
