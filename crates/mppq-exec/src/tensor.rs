//! [`Tensor`]: a rank-erased Burn tensor of any ONNX numeric or boolean type, with conversions
//! to and from the IR's [`TensorData`] and the kind-dispatching primitives operators build on.
//! Shapes are checked by the callers (operators) before Burn sees them: Burn asserts, and an
//! assert is a panic, which user input must never cause.

use crate::device::Device;
use crate::error::{ExecError, Result};
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{BoolDType, Bool, DType, FloatDType, Int, IntDType, Shape, Slice};
use mppq_ir::{DataType, TensorData};

/// Which family of Burn operations a tensor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Float,
    Int,
    Bool,
}

/// A tensor on some device, of any rank and ONNX dtype that Burn can hold.
#[derive(Clone, Debug)]
pub struct Tensor {
    inner: DispatchTensor,
}

/// The Burn dtype for an ONNX element type, if Burn can hold it.
pub fn burn_dtype(dt: DataType) -> Option<DType> {
    Some(match dt {
        DataType::Float => DType::F32,
        DataType::Double => DType::F64,
        DataType::Float16 => DType::F16,
        DataType::BFloat16 => DType::BF16,
        DataType::Int64 => DType::I64,
        DataType::Int32 => DType::I32,
        DataType::Int16 => DType::I16,
        DataType::Int8 => DType::I8,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool(burn::tensor::BoolStore::Native),
        _ => return None,
    })
}

/// The ONNX element type of a Burn dtype.
pub fn onnx_dtype(dt: DType) -> Option<DataType> {
    Some(match dt {
        DType::F32 | DType::Flex32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::BFloat16,
        DType::I64 => DataType::Int64,
        DType::I32 => DataType::Int32,
        DType::I16 => DataType::Int16,
        DType::I8 => DataType::Int8,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool(_) => DataType::Bool,
        DType::QFloat(_) => return None,
    })
}

fn float_dtype(dt: DataType) -> Option<FloatDType> {
    Some(match dt {
        DataType::Float => FloatDType::F32,
        DataType::Double => FloatDType::F64,
        DataType::Float16 => FloatDType::F16,
        DataType::BFloat16 => FloatDType::BF16,
        _ => return None,
    })
}

fn int_dtype(dt: DataType) -> Option<IntDType> {
    Some(match dt {
        DataType::Int64 => IntDType::I64,
        DataType::Int32 => IntDType::I32,
        DataType::Int16 => IntDType::I16,
        DataType::Int8 => IntDType::I8,
        DataType::Uint8 => IntDType::U8,
        DataType::Uint16 => IntDType::U16,
        DataType::Uint32 => IntDType::U32,
        DataType::Uint64 => IntDType::U64,
        _ => return None,
    })
}

const BOOL: BoolDType = BoolDType::Native;

impl Tensor {
    pub fn from_dispatch(inner: DispatchTensor) -> Self {
        Self { inner }
    }

    pub fn into_dispatch(self) -> DispatchTensor {
        self.inner
    }

    pub fn dispatch(&self) -> &DispatchTensor {
        &self.inner
    }

    pub fn shape(&self) -> Vec<usize> {
        self.inner.shape().to_vec()
    }

    pub fn rank(&self) -> usize {
        self.inner.shape().num_dims()
    }

    pub fn numel(&self) -> usize {
        self.inner.shape().num_elements()
    }

    pub fn burn_dtype(&self) -> DType {
        self.inner.dtype()
    }

    /// The ONNX element type (Burn's internal `Flex32` reads as float).
    pub fn dtype(&self) -> DataType {
        onnx_dtype(self.inner.dtype()).unwrap_or(DataType::Float)
    }

    pub fn kind(&self) -> Kind {
        match self.inner.dtype() {
            DType::Bool(_) => Kind::Bool,
            d if d.is_float() => Kind::Float,
            _ => Kind::Int,
        }
    }

    /// Uploads an IR tensor. Types Burn cannot hold (strings, 4-bit, FP8) are errors.
    pub fn from_data(data: &TensorData, device: &Device) -> Result<Self> {
        let dtype = burn_dtype(data.dtype()).ok_or_else(|| ExecError::Input {
            name: String::new(),
            message: format!("{} tensors cannot be computed with", data.dtype()),
        })?;
        let bytes = data.packed().unwrap_or_default().to_vec();
        let shape = Shape::from(data.shape().to_vec());
        let burn_data = burn::tensor::TensorData::from_bytes_vec(bytes, shape, dtype);
        let dev = device.dispatch();
        let inner = match data.dtype() {
            DataType::Bool => Dispatch::bool_from_data(burn_data, dev),
            d if d.is_float() => Dispatch::float_from_data(burn_data, dev),
            _ => Dispatch::int_from_data(burn_data, dev),
        };
        Ok(Self { inner })
    }

    /// A float32 tensor from values.
    pub fn from_f32(shape: &[usize], values: Vec<f32>, device: &Device) -> Self {
        let data = burn::tensor::TensorData::new(values, Shape::from(shape.to_vec()));
        Self { inner: Dispatch::float_from_data(data, device.dispatch()) }
    }

    /// An int64 tensor from values.
    pub fn from_i64(shape: &[usize], values: Vec<i64>, device: &Device) -> Self {
        let data = burn::tensor::TensorData::new(values, Shape::from(shape.to_vec()));
        Self { inner: Dispatch::int_from_data(data, device.dispatch()) }
    }

    /// A bool tensor from values.
    pub fn from_bool(shape: &[usize], values: Vec<bool>, device: &Device) -> Self {
        let data = burn::tensor::TensorData::new(values, Shape::from(shape.to_vec()));
        Self { inner: Dispatch::bool_from_data(data, device.dispatch()) }
    }

    /// Downloads the values as Burn data (blocking).
    pub fn to_burn_data(&self) -> burn::tensor::TensorData {
        let t = self.inner.clone();
        match self.kind() {
            Kind::Float => burn::tensor::Tensor::<1>::from_dispatch(t).into_data(),
            Kind::Int => burn::tensor::Tensor::<1, Int>::from_dispatch(t).into_data(),
            Kind::Bool => burn::tensor::Tensor::<1, Bool>::from_dispatch(t).into_data(),
        }
    }

    /// Downloads the values as an IR tensor of the same ONNX type.
    pub fn to_data(&self) -> Result<TensorData> {
        let data = self.to_burn_data();
        let dtype = self.dtype();
        let shape = self.shape();
        if dtype == DataType::Bool {
            let values = data.convert::<bool>();
            let v: Vec<bool> = values.try_to_vec::<bool>().unwrap_or_default();
            return Ok(TensorData::from_vec(shape, &v)?);
        }
        let data = if self.burn_dtype() == DType::Flex32 { data.convert::<f32>() } else { data };
        Ok(TensorData::from_packed(dtype, shape, data.as_bytes().to_vec())?)
    }

    /// Values widened to f64 (any numeric or bool type), for comparisons and small host-side
    /// computations.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.to_burn_data().convert::<f64>().try_to_vec::<f64>().unwrap_or_default()
    }

    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.to_burn_data().convert::<f32>().try_to_vec::<f32>().unwrap_or_default()
    }

    /// Values as i64 (floats truncate), e.g. for shape and index arguments.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self.kind() {
            Kind::Bool => self.to_burn_data().convert::<u8>().try_to_vec::<u8>().unwrap_or_default().into_iter().map(i64::from).collect(),
            _ => self.to_burn_data().convert::<i64>().try_to_vec::<i64>().unwrap_or_default(),
        }
    }

    /// Converts to another ONNX element type (float→int truncates toward zero, as ONNX Cast).
    pub fn cast(self, to: DataType) -> Result<Self> {
        if self.dtype() == to {
            return Ok(self);
        }
        let unsupported = || ExecError::Input { name: String::new(), message: format!("cannot cast to {to}") };
        let inner = match (self.kind(), to) {
            (Kind::Bool, DataType::Bool) => self.inner,
            (_, DataType::Bool) => {
                let zero = self.zeros_like();
                return Ok(self.not_equal(&zero));
            }
            (Kind::Float, t) if t.is_float() => Dispatch::float_cast(self.inner, float_dtype(t).ok_or_else(unsupported)?),
            (Kind::Float, t) => Dispatch::float_into_int(self.inner, int_dtype(t).ok_or_else(unsupported)?),
            (Kind::Int, t) if t.is_float() => Dispatch::int_into_float(self.inner, float_dtype(t).ok_or_else(unsupported)?),
            (Kind::Int, t) => Dispatch::int_cast(self.inner, int_dtype(t).ok_or_else(unsupported)?),
            (Kind::Bool, t) if t.is_float() => Dispatch::bool_into_float(self.inner, float_dtype(t).ok_or_else(unsupported)?),
            (Kind::Bool, t) => Dispatch::bool_into_int(self.inner, int_dtype(t).ok_or_else(unsupported)?),
        };
        Ok(Self { inner })
    }

    /// A tensor of zeros with this one's shape and type.
    pub fn zeros_like(&self) -> Self {
        let shape = self.inner.shape();
        let device = self.inner.device();
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_zeros(shape, &device, self.burn_dtype().into()),
            Kind::Int => Dispatch::int_zeros(shape, &device, self.burn_dtype().into()),
            Kind::Bool => Dispatch::bool_zeros(shape, &device, BOOL),
        };
        Self { inner }
    }

    /// Element-wise `!=` (any kind), a bool tensor. Shapes must broadcast.
    pub fn not_equal(&self, other: &Self) -> Self {
        let (a, b) = (self.inner.clone(), other.inner.clone());
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_not_equal(a, b, BOOL),
            Kind::Int => Dispatch::int_not_equal(a, b, BOOL),
            Kind::Bool => Dispatch::bool_not_equal(a, b),
        };
        Self { inner }
    }

    /// Same values, new shape (element counts must match; checked by the caller).
    pub fn reshape(self, shape: &[usize]) -> Self {
        let shape = Shape::from(shape.to_vec());
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_reshape(self.inner, shape),
            Kind::Int => Dispatch::int_reshape(self.inner, shape),
            Kind::Bool => Dispatch::bool_reshape(self.inner, shape),
        };
        Self { inner }
    }

    pub fn permute(self, axes: &[usize]) -> Self {
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_permute(self.inner, axes),
            Kind::Int => Dispatch::int_permute(self.inner, axes),
            Kind::Bool => Dispatch::bool_permute(self.inner, axes),
        };
        Self { inner }
    }

    pub fn slice(self, slices: &[Slice]) -> Self {
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_slice(self.inner, slices),
            Kind::Int => Dispatch::int_slice(self.inner, slices),
            Kind::Bool => Dispatch::bool_slice(self.inner, slices),
        };
        Self { inner }
    }

    /// Broadcasts to `shape` (must be broadcast-compatible; checked by the caller).
    pub fn expand(self, shape: &[usize]) -> Self {
        if self.shape() == shape {
            return self;
        }
        let shape = Shape::from(shape.to_vec());
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_expand(self.inner, shape),
            Kind::Int => Dispatch::int_expand(self.inner, shape),
            Kind::Bool => Dispatch::bool_expand(self.inner, shape),
        };
        Self { inner }
    }

    /// Concatenates same-kind tensors along `axis` (shapes checked by the caller).
    pub fn cat(tensors: Vec<Self>, axis: usize) -> Self {
        let kind = tensors.first().map_or(Kind::Float, Tensor::kind);
        let inner: Vec<DispatchTensor> = tensors.into_iter().map(|t| t.inner).collect();
        let inner = match kind {
            Kind::Float => Dispatch::float_cat(inner, axis),
            Kind::Int => Dispatch::int_cat(inner, axis),
            Kind::Bool => Dispatch::bool_cat(inner, axis),
        };
        Self { inner }
    }

    /// Picks entries along `axis` by an int64 index vector.
    pub fn select(self, axis: usize, indices: &Tensor) -> Self {
        let idx = indices.inner.clone();
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_select(self.inner, axis, idx),
            Kind::Int => Dispatch::int_select(self.inner, axis, idx),
            // flex's bool_select returns a bool tensor labelled U8; go through int64 instead.
            Kind::Bool => {
                let as_int = Dispatch::bool_into_int(self.inner, IntDType::I64);
                let picked = Self { inner: Dispatch::int_select(as_int, axis, idx) };
                return picked.clone().not_equal(&picked.zeros_like());
            }
        };
        Self { inner }
    }

    /// `where(mask, value, self)`; all three broadcast to the same shape (checked by the caller).
    pub fn mask_where(self, mask: &Tensor, value: Tensor) -> Self {
        let m = mask.inner.clone();
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_mask_where(self.inner, m, value.inner),
            Kind::Int => Dispatch::int_mask_where(self.inner, m, value.inner),
            Kind::Bool => Dispatch::bool_mask_where(self.inner, m, value.inner),
        };
        Self { inner }
    }
}

/// Brings two operands of a broadcasting operation to their common shape (numpy rules), or
/// returns their shapes when they do not broadcast.
pub fn broadcast_pair(a: Tensor, b: Tensor) -> std::result::Result<(Tensor, Tensor, Vec<usize>), (Vec<usize>, Vec<usize>)> {
    let (sa, sb) = (a.shape(), b.shape());
    let Some(out) = broadcast_shapes(&sa, &sb) else { return Err((sa, sb)) };
    let lift = |t: Tensor, s: &[usize]| {
        if s.len() == out.len() {
            t
        } else {
            let mut shape = vec![1; out.len() - s.len()];
            shape.extend_from_slice(s);
            t.reshape(&shape)
        }
    };
    Ok((lift(a, &sa).expand(&out), lift(b, &sb).expand(&out), out))
}

/// The numpy broadcast of two shapes, or `None` if they do not broadcast.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Normalises a possibly negative axis for a tensor of `rank`; `None` when out of range
/// (always for a scalar, which has no axes).
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}
