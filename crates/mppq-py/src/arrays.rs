//! NumPy arrays across the boundary. The Python side hands each array over as its NumPy
//! `descr` (`<f4`), its shape and a flat `uint8` view of its C-contiguous memory (a view: no
//! copy), so one code path serves every dtype; the bytes are copied once into the IR tensor.
//! Outputs go back the same way: one `uint8` array the Python side views with the dtype.

use crate::errors::data_error;
use mppq_api::data::npy::{descr_of, dtype_of};
use mppq_api::ir::TensorData;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

/// One array as the Python side sends it: (input name, descr, shape, bytes).
pub type ArrayIn<'py> = (String, String, Vec<usize>, PyReadonlyArray1<'py, u8>);

/// One array as the Python side receives it.
pub type ArrayOut<'py> = (String, &'static str, Vec<usize>, Bound<'py, PyArray1<u8>>);

/// The IR tensors of a batch; `label` names it in errors.
pub fn batch_from_py(label: &str, arrays: Vec<ArrayIn<'_>>) -> PyResult<Vec<(String, TensorData)>> {
    arrays
        .into_iter()
        .map(|(name, descr, shape, bytes)| {
            let dtype = dtype_of(&descr).ok_or_else(|| {
                data_error(format!(
                    "`{label}`: input `{name}` has dtype `{descr}`; mppq reads float16/32/64, (u)int8-64 and bool \
                     arrays (convert it with .astype)"
                ))
            })?;
            let bytes = bytes.as_slice().map_err(|e| data_error(format!("`{label}`: input `{name}`: {e}")))?;
            let data = TensorData::from_packed(dtype, shape, bytes.to_vec())
                .map_err(|e| data_error(format!("`{label}`: input `{name}`: {e}")))?;
            Ok((name, data))
        })
        .collect()
}

/// Tensors as (name, descr, shape, bytes) for the Python side.
pub fn batch_to_py<'py>(py: Python<'py>, tensors: &[(String, TensorData)]) -> PyResult<Vec<ArrayOut<'py>>> {
    tensors
        .iter()
        .map(|(name, data)| {
            let descr = descr_of(data.dtype()).ok_or_else(|| {
                data_error(format!("output `{name}` is {}, which NumPy cannot hold here", data.dtype()))
            })?;
            let bytes = PyArray1::from_slice(py, data.packed().unwrap_or_default());
            Ok((name.clone(), descr, data.shape().to_vec(), bytes))
        })
        .collect()
}
