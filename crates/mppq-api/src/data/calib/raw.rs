//! Raw `.bin` files: the bytes of one input tensor, little-endian, C order, no header (the
//! usage tutorial's second format). The shape comes from `[data] input_shape` / `--input-shape`,
//! or from the model when it declares every dimension; one dynamic dimension is inferred from
//! the file's length.

use super::signature::Input;
use crate::error::{ApiError, Result};
use mppq_ir::{DataType, TensorData};
use std::path::Path;

/// The shape a `.bin` file of `bytes` bytes holds for `input`; `given` is the user's shape.
pub fn shape_of(input: &Input, given: Option<&[usize]>, bytes: u64, path: &Path) -> Result<Vec<usize>> {
    let dtype = input.dtype().unwrap_or(DataType::Float);
    let mppq_ir::dtype::ElementWidth::Bytes(element) = dtype.width() else {
        return Err(ApiError::data(
            path,
            format!("input `{}` is {dtype}: raw .bin files hold whole bytes per element", input.name),
        ));
    };
    let element = element as u64;
    if let Some(shape) = given {
        let need = shape.iter().try_fold(element, |n, d| n.checked_mul(*d as u64));
        if need != Some(bytes) {
            return Err(ApiError::data(
                path,
                format!(
                    "{bytes} bytes, but input `{}` of shape {shape:?} in {dtype} needs {} bytes",
                    input.name,
                    need.map_or("more than any file".into(), |n| n.to_string())
                ),
            ));
        }
        return Ok(shape.to_vec());
    }
    let Some(dims) = input.dims() else {
        return Err(ApiError::data(
            path,
            format!("input `{}` declares no shape: give it with --input-shape (e.g. 1,3,224,224)", input.name),
        ));
    };
    let fixed = dims.iter().flatten().try_fold(element, |n, d| n.checked_mul(*d as u64)).unwrap_or(u64::MAX);
    let dynamic: Vec<usize> = dims.iter().enumerate().filter(|(_, d)| d.is_none()).map(|(i, _)| i).collect();
    let shape = match dynamic.as_slice() {
        [] if fixed == bytes => Some(dims.iter().flatten().copied().collect()),
        [one] if fixed > 0 && bytes.is_multiple_of(fixed) && bytes > 0 => Some(
            dims.iter()
                .enumerate()
                .map(|(i, d)| if i == *one { (bytes / fixed) as usize } else { d.unwrap_or(0) })
                .collect(),
        ),
        _ => None,
    };
    shape.ok_or_else(|| {
        ApiError::data(
            path,
            format!(
                "{bytes} bytes do not make input `{}` ({} dynamic dimension(s), {fixed} bytes for the fixed ones, {dtype}): give the shape with --input-shape",
                input.name,
                dynamic.len()
            ),
        )
    })
}

/// Reads a `.bin` file as `input`'s element type in `shape`.
pub fn read(input: &Input, shape: Vec<usize>, path: &Path) -> Result<TensorData> {
    let bytes = std::fs::read(path).map_err(|source| ApiError::Io { path: path.display().to_string(), source })?;
    let dtype = input.dtype().unwrap_or(DataType::Float);
    TensorData::from_packed(dtype, shape, bytes).map_err(|e| ApiError::data(path, e.to_string()))
}
