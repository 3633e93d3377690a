//! [`Tensor`]: a rank-erased Burn tensor of any ONNX numeric or boolean type, with conversions
//! to and from the IR's [`TensorData`] and the kind-dispatching primitives operators build on.
//! Shapes are checked by the callers (operators) before Burn sees them: Burn asserts, and an
//! assert is a panic, which user input must never cause.
//!
//! Devices that cannot hold a tensor the way ONNX describes it (cubecl: no rank-0 allocations, no
//! 8/16-bit ints, no BF16, bools stored as u32) get a *stand-in*: the physical Burn tensor has
//! shape `[1]` and/or a wider element type, and the tensor remembers what it stands for, so
//! shapes and types reported to the graph, and values read back, are the ONNX ones. On the CPU
//! (`flex`) every tensor Burn has a type for is held as is.
//!
//! The low-precision types (FP8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ, E8M0, FP4 E2M1, INT4/UINT4,
//! INT2/UINT2), which no Burn backend holds, are stand-ins on every device: the float ones in
//! F32 holding exactly the values of the type, the integers in I32 holding the sign-extended
//! values. Uploads decode the codes, downloads encode them back (exactly), [`Tensor::cast`]
//! rounds into them as ONNX's Cast does ([`CastOptions`]: `saturate`, E8M0 `round_mode`). Only
//! kernels that say so ([`crate::Kernel::handles_low_precision`]: the casts, Q/DQ, data
//! movement) are given such tensors; the engine refuses them to every other one.

use crate::device::{self, Device};
use crate::error::{ExecError, Result};
use crate::value::Value;
use burn::backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{Bool, BoolDType, DType, FloatDType, Int, IntDType, Scalar, Shape, Slice};
use mppq_ir::lowp::{self, E8M0Rounding, MiniFloat};
use mppq_ir::{DataType, TensorData};

/// Which family of Burn operations a tensor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Float,
    Int,
    Bool,
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

/// The bool storage of comparison results for a tensor on `t`'s device.
pub fn bool_for(t: &DispatchTensor) -> BoolDType {
    device::bool_dtype(&t.device())
}

/// The type a device that lacks `dt` computes it in: I32 for 8/16-bit ints, F32 for BF16; on
/// every device, F32 for the FP8/FP4/E8M0 types and I32 for the 4/2-bit ints.
fn stand_in_dtype(dt: DataType) -> Option<DType> {
    match dt {
        DataType::Int8 | DataType::Uint8 | DataType::Int16 | DataType::Uint16 => Some(DType::I32),
        // BF16 on wgpu, F16 and BF16 on ndarray: computed in F32, rounded back on read-back.
        DataType::BFloat16 | DataType::Float16 => Some(DType::F32),
        d if lowp::is_low_precision(d) => Some(if d.is_float() { DType::F32 } else { DType::I32 }),
        _ => None,
    }
}

/// Whether `dt` is a low-precision type (FP8, FP4, E8M0, 4/2-bit int), held by stand-in on
/// every device.
pub fn is_low_precision(dt: DataType) -> bool {
    lowp::is_low_precision(dt)
}

/// How [`Tensor::cast_with`] rounds into the FP8 and E8M0 types (ONNX Cast's attributes);
/// other targets ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CastOptions {
    /// Out-of-range values become ±max (`true`, ONNX's default) or ±∞/NaN per format.
    pub saturate: bool,
    /// E8M0 rounding (`round_mode`, opset 24+; `up` by default).
    pub e8m0: E8M0Rounding,
}

impl Default for CastOptions {
    fn default() -> Self {
        Self { saturate: true, e8m0: E8M0Rounding::Up }
    }
}

/// What a tensor stands for when its device cannot hold it as ONNX describes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Logical {
    /// A rank-0 value held with shape `[1]`.
    scalar: bool,
    /// An ONNX type the device lacks, held in its [`stand_in_dtype`].
    dtype: Option<DataType>,
    /// The ONNX type is decided (upload, cast); an operator's raw result is not, and may take
    /// the type of its stand-in input (see [`Tensor::adopt_stand_in`]).
    decided: bool,
}

/// Uploads `data`'s values into its stand-in: F32 (`float`) or I32 (sign-extended integers).
fn upload_stand_in(
    data: &TensorData,
    float: bool,
    shape: Shape,
    dev: &burn::backend::DispatchDevice,
) -> std::result::Result<DispatchTensor, String> {
    Ok(if float {
        let values = data.to_f32_vec().map_err(|e| e.to_string())?;
        Dispatch::float_from_data(burn::tensor::TensorData::new(values, shape), dev)
    } else {
        let values: Vec<i32> = data.to_i64_vec().map_err(|e| e.to_string())?.into_iter().map(|v| v as i32).collect();
        Dispatch::int_from_data(burn::tensor::TensorData::new(values, shape), dev)
    })
}

/// A tensor on some device, of any rank and ONNX dtype that Burn can hold.
#[derive(Clone, Debug)]
pub struct Tensor {
    inner: DispatchTensor,
    logical: Logical,
}

impl Tensor {
    /// Wraps an operator's Burn result. On a device without rank-0 tensors a rank-0 result
    /// (a metadata-only reshape) is held as `[1]` from here on.
    pub fn from_dispatch(inner: DispatchTensor) -> Self {
        let t = Self { inner, logical: Logical::default() };
        if t.inner.shape().num_dims() == 0 && !device::is_cpu(&t.inner.device()) { t.hold_as_scalar() } else { t }
    }

    /// [`Tensor::from_dispatch`] of an element-wise result whose ONNX shape is `shape`: a scalar
    /// computed on `[1]` stand-ins (a device without rank-0 tensors) stays the scalar it is, so
    /// `Unsqueeze(Mul(a[], b[]))` is `[1]`, not `[1, 1]`.
    pub fn from_dispatch_shaped(inner: DispatchTensor, shape: &[usize]) -> Self {
        let t = Self::from_dispatch(inner);
        let physical = t.inner.shape();
        if shape.is_empty() && !t.logical.scalar && physical.num_dims() == 1 && physical.num_elements() == 1 {
            t.hold_as_scalar()
        } else {
            t
        }
    }

    /// A physical rank-0 or `[1]` tensor held as a logical scalar.
    fn hold_as_scalar(self) -> Self {
        let inner = if self.inner.shape().num_dims() == 0 {
            reshape_raw(self.kind(), self.inner, Shape::from(vec![1]))
        } else {
            self.inner
        };
        Self { inner, logical: Logical { scalar: true, ..self.logical } }
    }

    /// A result with this stand-in type (`logical`) and the given physical tensor.
    fn derive(logical: Logical, inner: DispatchTensor) -> Self {
        Self { inner, logical: Logical { scalar: false, ..logical } }
    }

    /// The Burn tensor (the stand-in, where there is one: shape `[1]` for a scalar, I32/F32 for
    /// a type the device lacks).
    pub fn into_dispatch(self) -> DispatchTensor {
        self.inner
    }

    pub fn dispatch(&self) -> &DispatchTensor {
        &self.inner
    }

    /// The ONNX shape (`[]` for a scalar, whatever its stand-in).
    pub fn shape(&self) -> Vec<usize> {
        if self.logical.scalar { Vec::new() } else { self.inner.shape().to_vec() }
    }

    pub fn rank(&self) -> usize {
        if self.logical.scalar { 0 } else { self.inner.shape().num_dims() }
    }

    pub fn numel(&self) -> usize {
        self.inner.shape().num_elements()
    }

    /// The Burn dtype of the held tensor (a stand-in's wider type).
    pub fn burn_dtype(&self) -> DType {
        self.inner.dtype()
    }

    /// The ONNX element type (Burn's internal `Flex32` reads as float).
    pub fn dtype(&self) -> DataType {
        self.logical.dtype.unwrap_or_else(|| onnx_dtype(self.inner.dtype()).unwrap_or(DataType::Float))
    }

    pub fn kind(&self) -> Kind {
        kind_of(self.inner.dtype())
    }

    /// Uploads an IR tensor. Strings and complex numbers are errors; low-precision types
    /// (FP8, FP4, E8M0, 4/2-bit ints) and types the device lacks are held in a stand-in type,
    /// scalars as `[1]` where rank 0 is not allowed.
    pub fn from_data(data: &TensorData, device: &Device) -> Result<Self> {
        let cannot = |message: String| ExecError::Input { name: String::new(), message };
        let cpu = device.is_cpu();
        let scalar = !cpu && data.shape().is_empty();
        let shape = Shape::from(if scalar { vec![1] } else { data.shape().to_vec() });
        let dev = device.dispatch();
        let mut logical = Logical { scalar, dtype: None, decided: true };
        if is_low_precision(data.dtype()) {
            logical.dtype = Some(data.dtype());
            let inner = upload_stand_in(data, data.dtype().is_float(), shape, dev).map_err(cannot)?;
            return Ok(Self { inner, logical });
        }
        let dtype = burn_dtype(data.dtype())
            .ok_or_else(|| cannot(format!("{} tensors cannot be computed with", data.dtype())))?;
        let inner = match data.dtype() {
            DataType::Bool => {
                // A byte other than 0 and 1 is true (as NumPy and ONNX Runtime read it); kept as
                // is, Burn refuses it as an invalid bit pattern by panicking at the first use.
                let bytes: Vec<u8> = data.packed().unwrap_or_default().iter().map(|b| u8::from(*b != 0)).collect();
                let burn_data = burn::tensor::TensorData::from_bytes_vec(bytes, shape, dtype);
                let store = DType::Bool(device.bool_dtype());
                let burn_data = burn_data
                    .try_cast(store)
                    .map_err(|e| cannot(format!("bool tensor cannot be stored as {store:?} on this device: {e}")))?;
                Dispatch::bool_from_data(burn_data, dev)
            }
            d if !cpu && !device.supports_dtype(dtype) => {
                let Some(stand_in) = stand_in_dtype(d) else {
                    return Err(cannot(format!("{d} tensors are not supported by this device")));
                };
                logical.dtype = Some(d);
                upload_stand_in(data, stand_in == DType::F32, shape, dev).map_err(cannot)?
            }
            d => {
                let bytes = data.packed().unwrap_or_default().to_vec();
                let burn_data = burn::tensor::TensorData::from_bytes_vec(bytes, shape, dtype);
                if d.is_float() {
                    Dispatch::float_from_data(burn_data, dev)
                } else {
                    Dispatch::int_from_data(burn_data, dev)
                }
            }
        };
        Ok(Self { inner, logical })
    }

    /// Uploads host values (any Burn element type) of an ONNX `shape`.
    fn upload(data: Vec<impl burn::tensor::Element>, shape: &[usize], device: &Device, kind: Kind) -> Self {
        let scalar = shape.is_empty() && !device.is_cpu();
        let shape = Shape::from(if scalar { vec![1] } else { shape.to_vec() });
        let data = burn::tensor::TensorData::new(data, shape);
        let dev = device.dispatch();
        let inner = match kind {
            Kind::Float => Dispatch::float_from_data(data, dev),
            Kind::Int => Dispatch::int_from_data(data, dev),
            Kind::Bool => {
                let store = DType::Bool(device.bool_dtype());
                // Bool data converts to every bool store (u8 or u32 of 0/1); keep it as is otherwise.
                let data = if data.dtype() == store { data } else { data.clone().try_cast(store).unwrap_or(data) };
                Dispatch::bool_from_data(data, dev)
            }
        };
        Self { inner, logical: Logical { scalar, dtype: None, decided: true } }
    }

    /// A float32 tensor of `shape` on this tensor's device holding `values` (results of a
    /// host-side computation on [`Self::to_f32_vec`]); `values.len()` must be the shape's size.
    pub fn like_f32(&self, shape: &[usize], values: Vec<f32>) -> Self {
        let dev = self.inner.device();
        let scalar = shape.is_empty() && !device::is_cpu(&dev);
        let shape = Shape::from(if scalar { vec![1] } else { shape.to_vec() });
        let inner = Dispatch::float_from_data(burn::tensor::TensorData::new(values, shape), &dev);
        Self { inner, logical: Logical { scalar, dtype: None, decided: true } }
    }

    /// A float32 tensor from values.
    pub fn from_f32(shape: &[usize], values: Vec<f32>, device: &Device) -> Self {
        Self::upload(values, shape, device, Kind::Float)
    }

    /// An int64 tensor from values.
    pub fn from_i64(shape: &[usize], values: Vec<i64>, device: &Device) -> Self {
        Self::upload(values, shape, device, Kind::Int)
    }

    /// A bool tensor from values.
    pub fn from_bool(shape: &[usize], values: Vec<bool>, device: &Device) -> Self {
        Self::upload(values, shape, device, Kind::Bool)
    }

    /// The same values on `device` (through the host: any pair of devices, autodiff or not).
    pub fn to_device(&self, device: &Device) -> Result<Self> {
        Self::from_data(&self.to_data()?, device)
    }

    /// Downloads the held values as Burn data (blocking): the stand-in's type and shape.
    pub fn to_burn_data(&self) -> burn::tensor::TensorData {
        let t = self.inner.clone();
        match self.kind() {
            Kind::Float => burn::tensor::Tensor::<1>::from_dispatch(t).into_data(),
            Kind::Int => burn::tensor::Tensor::<1, Int>::from_dispatch(t).into_data(),
            Kind::Bool => burn::tensor::Tensor::<1, Bool>::from_dispatch(t).into_data(),
        }
    }

    /// Downloads the values in the ONNX type: a stand-in's values wrap (8/16-bit ints) or round
    /// (BF16, F16) to the type it stands for. Low-precision stand-ins already hold exactly their
    /// type's values (in F32 or I32), which is what this gives for them.
    fn to_onnx_burn_data(&self) -> burn::tensor::TensorData {
        let data = self.to_burn_data();
        let Some(dt) = self.logical.dtype else { return data };
        let shape = data.shape().clone();
        match dt {
            d if is_low_precision(d) => data,
            DataType::BFloat16 => data.convert::<burn::tensor::bf16>(),
            DataType::Float16 => data.convert::<burn::tensor::f16>(),
            _ => {
                let v: Vec<i64> = data.convert::<i64>().try_to_vec::<i64>().unwrap_or_default();
                match dt {
                    DataType::Int8 => burn::tensor::TensorData::new(v.iter().map(|x| *x as i8).collect(), shape),
                    DataType::Uint8 => burn::tensor::TensorData::new(v.iter().map(|x| *x as u8).collect(), shape),
                    DataType::Int16 => burn::tensor::TensorData::new(v.iter().map(|x| *x as i16).collect(), shape),
                    _ => burn::tensor::TensorData::new(v.iter().map(|x| *x as u16).collect::<Vec<u16>>(), shape),
                }
            }
        }
    }

    /// Downloads the values as an IR tensor of the same ONNX type and shape.
    pub fn to_data(&self) -> Result<TensorData> {
        let data = self.to_onnx_burn_data();
        let dtype = self.dtype();
        let shape = self.shape();
        if is_low_precision(dtype) {
            // Encoding is exact: the stand-in holds values of the type.
            return Ok(if dtype.is_float() {
                TensorData::from_f32_codes(
                    dtype,
                    shape,
                    &data.convert::<f32>().try_to_vec::<f32>().unwrap_or_default(),
                )?
            } else {
                TensorData::from_i64_sub_byte(
                    dtype,
                    shape,
                    &data.convert::<i64>().try_to_vec::<i64>().unwrap_or_default(),
                )?
            });
        }
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
        self.to_onnx_burn_data().convert::<f64>().try_to_vec::<f64>().unwrap_or_default()
    }

    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.to_onnx_burn_data().convert::<f32>().try_to_vec::<f32>().unwrap_or_default()
    }

    /// Values as i64 (floats truncate), e.g. for shape and index arguments.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self.kind() {
            Kind::Bool => self
                .to_burn_data()
                .convert::<u8>()
                .try_to_vec::<u8>()
                .unwrap_or_default()
                .into_iter()
                .map(i64::from)
                .collect(),
            // Float values (a mutated model's float K or shape) saturate as Rust's `as` does, NaN
            // to 0: Burn's conversion panics on a value no i64 holds.
            Kind::Float => self.to_f64_vec().into_iter().map(|v| v as i64).collect(),
            _ => self.to_onnx_burn_data().convert::<i64>().try_to_vec::<i64>().unwrap_or_default(),
        }
    }

    /// Converts to another ONNX element type (float→int truncates toward zero, as ONNX Cast),
    /// saturating into FP8 with E8M0 rounding up ([`CastOptions::default`]).
    /// On a device that lacks `to`, the result is its stand-in, wrapped into `to`'s range.
    pub fn cast(self, to: DataType) -> Result<Self> {
        self.cast_with(to, CastOptions::default())
    }

    /// [`Self::cast`] with ONNX Cast's options for the FP8 and E8M0 targets. Into a
    /// low-precision float type, values round to nearest, ties to even (host-side: the values
    /// are downloaded, rounded by [`mppq_ir::lowp`] and uploaded again); into a 4/2-bit int,
    /// floats truncate and integers wrap (two's complement), as ONNX's reference does.
    pub fn cast_with(self, to: DataType, options: CastOptions) -> Result<Self> {
        if self.dtype() == to {
            return Ok(Self { logical: Logical { decided: true, ..self.logical }, ..self });
        }
        let unsupported = || ExecError::Input { name: String::new(), message: format!("cannot cast to {to}") };
        if is_low_precision(to) {
            return self.cast_to_low_precision(to, options).ok_or_else(unsupported);
        }
        // A low-precision stand-in holds its exact values in F32/I32: cast those.
        let this = if self.logical.dtype.is_some_and(is_low_precision) {
            Self { logical: Logical { dtype: None, ..self.logical }, ..self }
        } else {
            self
        };
        this.cast_plain(to)
    }

    /// Casts into a low-precision type (`None`: a source that cannot be cast, e.g. strings).
    fn cast_to_low_precision(self, to: DataType, options: CastOptions) -> Option<Self> {
        let scalar = self.logical.scalar;
        if !to.is_float() {
            // 4/2-bit ints: truncate/convert into I32, then wrap into the type's range.
            let held = self.cast_with(DataType::Int32, options).ok()?;
            let held = Self { inner: held.inner, logical: Logical { scalar, dtype: Some(to), decided: true } };
            return Some(held.wrapped());
        }
        let shape = self.shape();
        // f64 sources round once (no detour through f32), except into E8M0, whose rule is on
        // the f32 bits (as ONNX's reference).
        let values: Vec<f32> = match (MiniFloat::of(to), self.dtype()) {
            (Some(fmt), DataType::Double) => {
                self.to_f64_vec().into_iter().map(|v| fmt.decode(fmt.encode_f64(v, options.saturate))).collect()
            }
            (Some(fmt), _) => self.to_f32_vec().into_iter().map(|v| fmt.round(v, options.saturate)).collect(),
            (None, _) => self
                .to_f32_vec()
                .into_iter()
                .map(|v| lowp::e8m0_decode(lowp::e8m0_encode(v, options.saturate, options.e8m0)))
                .collect(),
        };
        let held = self.like_f32(&shape, values);
        Some(Self {
            inner: held.inner,
            logical: Logical { scalar: held.logical.scalar, dtype: Some(to), decided: true },
        })
    }

    /// The cast between types Burn holds (or their stand-ins on a device that lacks them).
    fn cast_plain(self, to: DataType) -> Result<Self> {
        if self.dtype() == to {
            return Ok(Self { logical: Logical { decided: true, ..self.logical }, ..self });
        }
        let unsupported = || ExecError::Input { name: String::new(), message: format!("cannot cast to {to}") };
        let dev = self.inner.device();
        let emulate = !device::is_cpu(&dev)
            && to != DataType::Bool
            && burn_dtype(to).is_some_and(|d| !device::supports_dtype(&dev, d));
        let logical = Logical { scalar: self.logical.scalar, dtype: None, decided: true };
        if emulate {
            let stand_in = stand_in_dtype(to).ok_or_else(unsupported)?;
            let physical = if stand_in == DType::F32 { DataType::Float } else { DataType::Int32 };
            let held = Self { logical: Logical { dtype: None, ..self.logical }, ..self }.cast(physical)?;
            let held = Self { inner: held.inner, logical: Logical { dtype: Some(to), ..logical } };
            return Ok(held.wrapped());
        }
        let inner = match (self.kind(), to) {
            (Kind::Bool, DataType::Bool) => self.inner,
            (_, DataType::Bool) => {
                let zero = self.zeros_like();
                let out = self.not_equal(&zero);
                return Ok(Self { inner: out.inner, logical });
            }
            (Kind::Float, t) if t.is_float() => {
                Dispatch::float_cast(self.inner, float_dtype(t).ok_or_else(unsupported)?)
            }
            (Kind::Float, t) => Dispatch::float_into_int(self.inner, int_dtype(t).ok_or_else(unsupported)?),
            (Kind::Int, t) if t.is_float() => {
                Dispatch::int_into_float(self.inner, float_dtype(t).ok_or_else(unsupported)?)
            }
            (Kind::Int, t) => Dispatch::int_cast(self.inner, int_dtype(t).ok_or_else(unsupported)?),
            (Kind::Bool, t) if t.is_float() => {
                Dispatch::bool_into_float(self.inner, float_dtype(t).ok_or_else(unsupported)?)
            }
            (Kind::Bool, t) => Dispatch::bool_into_int(self.inner, int_dtype(t).ok_or_else(unsupported)?),
        };
        Ok(Self { inner, logical })
    }

    /// A stand-in for an 8/16/4/2-bit int brought into its type's range on the device (two's
    /// complement wrap, as the CPU's narrow ints do), so later operators see ONNX's values.
    fn wrapped(self) -> Self {
        let (bits, signed) = match self.logical.dtype {
            Some(DataType::Int8) => (8, true),
            Some(DataType::Uint8) => (8, false),
            Some(DataType::Int16) => (16, true),
            Some(DataType::Uint16) => (16, false),
            Some(d) => match lowp::sub_byte_int(d) {
                Some(bits_signed) => bits_signed,
                None => return self,
            },
            None => return self,
        };
        let mask = Scalar::Int((1i64 << bits) - 1);
        let half = Scalar::Int(1i64 << (bits - 1));
        let inner = if signed {
            let shifted = Dispatch::int_add_scalar(self.inner, half);
            Dispatch::int_sub_scalar(Dispatch::bitwise_and_scalar(shifted, mask), half)
        } else {
            Dispatch::bitwise_and_scalar(self.inner, mask)
        };
        Self { inner, logical: self.logical }
    }

    /// After an operator ran on a device with stand-ins: a raw result held in the stand-in type
    /// of the operator's first stand-in input takes that input's ONNX type (wrapped into its range), so
    /// `Add(int8, int8)` computed in I32 is int8 again. Results whose type the operator decided
    /// (casts, uploads) keep it; so do inputs passed through.
    pub fn adopt_stand_in(stand_in_input: Option<DataType>, outputs: &mut [Option<Value>]) {
        let Some(dt) = stand_in_input else { return };
        let Some(stand_in) = stand_in_dtype(dt) else { return };
        for out in outputs.iter_mut() {
            if let Some(Value::Tensor(t)) = out
                && !t.logical.decided
                && t.logical.dtype.is_none()
                && t.inner.dtype() == stand_in
            {
                let held = Self { inner: t.inner.clone(), logical: Logical { dtype: Some(dt), ..t.logical } };
                *t = held.wrapped();
            }
        }
    }

    /// The ONNX type a stand-in holds (`None` for a tensor held as is).
    pub fn stand_in_for(&self) -> Option<DataType> {
        self.logical.dtype
    }

    /// A tensor of zeros with this one's shape and type.
    pub fn zeros_like(&self) -> Self {
        let shape = self.inner.shape();
        let device = self.inner.device();
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_zeros(shape, &device, self.burn_dtype().into()),
            Kind::Int => Dispatch::int_zeros(shape, &device, self.burn_dtype().into()),
            Kind::Bool => Dispatch::bool_zeros(shape, &device, device::bool_dtype(&device)),
        };
        Self { inner, logical: self.logical }
    }

    /// Element-wise `!=` (any kind), a bool tensor. Shapes must broadcast.
    pub fn not_equal(&self, other: &Self) -> Self {
        let (a, b) = (self.inner.clone(), other.inner.clone());
        let bool_dt = bool_for(&a);
        let inner = match self.kind() {
            Kind::Float => Dispatch::float_not_equal(a, b, bool_dt),
            Kind::Int => Dispatch::int_not_equal(a, b, bool_dt),
            Kind::Bool => Dispatch::bool_not_equal(a, b),
        };
        let scalar = self.logical.scalar && other.logical.scalar;
        Self { inner, logical: Logical { scalar, dtype: None, decided: false } }
    }

    /// Same values, new shape (element counts must match; checked by the caller). A shape `[]`
    /// is held as `[1]` where the device has no rank-0 tensors.
    pub fn reshape(self, shape: &[usize]) -> Self {
        let scalar = shape.is_empty() && !device::is_cpu(&self.inner.device());
        let target = if scalar { vec![1] } else { shape.to_vec() };
        let (logical, kind) = (self.logical, self.kind());
        let out = if self.inner.shape().to_vec() == target {
            self.inner
        } else {
            reshape_raw(kind, self.inner, Shape::from(target))
        };
        Self { inner: out, logical: Logical { scalar, ..logical } }
    }

    pub fn permute(self, axes: &[usize]) -> Self {
        if self.logical.scalar {
            return self;
        }
        let (logical, kind) = (self.logical, self.kind());
        let inner = self.inner;
        let inner = match kind {
            Kind::Float => Dispatch::float_permute(inner, axes),
            Kind::Int => Dispatch::int_permute(inner, axes),
            Kind::Bool => Dispatch::bool_permute(inner, axes),
        };
        Self::derive(logical, inner)
    }

    pub fn slice(self, slices: &[Slice]) -> Self {
        if self.logical.scalar {
            return self;
        }
        let (logical, kind) = (self.logical, self.kind());
        let inner = self.inner;
        let inner = match kind {
            Kind::Float => Dispatch::float_slice(inner, slices),
            Kind::Int => Dispatch::int_slice(inner, slices),
            Kind::Bool => Dispatch::bool_slice(inner, slices),
        };
        Self::derive(logical, inner)
    }

    /// Broadcasts to `shape` (must be broadcast-compatible; checked by the caller).
    pub fn expand(self, shape: &[usize]) -> Self {
        if self.shape() == shape {
            return self;
        }
        let target = Shape::from(shape.to_vec());
        let (logical, kind) = (self.logical, self.kind());
        let inner = self.inner;
        let inner = match kind {
            Kind::Float => Dispatch::float_expand(inner, target),
            Kind::Int => Dispatch::int_expand(inner, target),
            Kind::Bool => Dispatch::bool_expand(inner, target),
        };
        Self::derive(logical, inner)
    }

    /// Concatenates same-kind tensors along `axis` (shapes checked by the caller).
    pub fn cat(tensors: Vec<Self>, axis: usize) -> Self {
        let kind = tensors.first().map_or(Kind::Float, Tensor::kind);
        let logical = tensors.first().map(|t| Logical { scalar: false, ..t.logical }).unwrap_or_default();
        let inner: Vec<DispatchTensor> = tensors.into_iter().map(|t| t.inner).collect();
        let inner = match kind {
            Kind::Float => Dispatch::float_cat(inner, axis),
            Kind::Int => Dispatch::int_cat(inner, axis),
            Kind::Bool => Dispatch::bool_cat(inner, axis),
        };
        Self { inner, logical }
    }

    /// Picks entries along `axis` by an int64 index vector.
    pub fn select(self, axis: usize, indices: &Tensor) -> Self {
        let idx = indices.inner.clone();
        let (logical, kind) = (self.logical, self.kind());
        let inner = match kind {
            Kind::Float => Dispatch::float_select(self.inner, axis, idx),
            Kind::Int => Dispatch::int_select(self.inner, axis, idx),
            // flex's bool_select returns a bool tensor labelled U8; go through int64 instead.
            Kind::Bool => {
                let as_int = Dispatch::bool_into_int(self.inner, IntDType::I64);
                let picked = Self::from_dispatch(Dispatch::int_select(as_int, axis, idx));
                return picked.clone().not_equal(&picked.zeros_like());
            }
        };
        Self::derive(logical, inner)
    }

    /// `where(mask, value, self)`; all three broadcast to the same shape (checked by the caller).
    pub fn mask_where(self, mask: &Tensor, value: Tensor) -> Self {
        let m = mask.inner.clone();
        let (logical, kind) = (self.logical, self.kind());
        let inner = self.inner;
        let inner = match kind {
            Kind::Float => Dispatch::float_mask_where(inner, m, value.inner),
            Kind::Int => Dispatch::int_mask_where(inner, m, value.inner),
            Kind::Bool => Dispatch::bool_mask_where(inner, m, value.inner),
        };
        Self { inner, logical }
    }
}

fn kind_of(dt: DType) -> Kind {
    match dt {
        DType::Bool(_) => Kind::Bool,
        d if d.is_float() => Kind::Float,
        _ => Kind::Int,
    }
}

fn reshape_raw(kind: Kind, t: DispatchTensor, shape: Shape) -> DispatchTensor {
    match kind {
        Kind::Float => Dispatch::float_reshape(t, shape),
        Kind::Int => Dispatch::int_reshape(t, shape),
        Kind::Bool => Dispatch::bool_reshape(t, shape),
    }
}

/// Two operands brought to their common shape, and that shape.
pub type Broadcast = (Tensor, Tensor, Vec<usize>);

/// Brings two operands of a broadcasting operation to their common shape (numpy rules), or
/// returns their shapes when they do not broadcast.
pub fn broadcast_pair(a: Tensor, b: Tensor) -> std::result::Result<Broadcast, (Vec<usize>, Vec<usize>)> {
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
