//! Blob values: the `float` or `double` data of a `BlobProto`, checked against the element count
//! the layer needs. The blob's own shape is only reported, not required: legacy blobs carry 4-D
//! shapes (`1 x 1 x N x K` for an InnerProduct weight) that Caffe also accepts by count.

use super::schema::BlobProto;

/// The shape a blob declares: `shape`, else the legacy `num, channels, height, width`.
pub(crate) fn declared_shape(blob: &BlobProto) -> Vec<i64> {
    match &blob.shape {
        Some(s) => s.dim.clone(),
        None => [blob.num(), blob.channels(), blob.height(), blob.width()].iter().map(|&d| i64::from(d)).collect(),
    }
}

/// The blob's values as `f32`, which must be `expected` many.
pub(crate) fn values(blob: &BlobProto, expected: usize) -> Result<Vec<f32>, String> {
    let values: Vec<f32> = if blob.data.is_empty() && !blob.double_data.is_empty() {
        blob.double_data.iter().map(|&v| v as f32).collect()
    } else {
        blob.data.clone()
    };
    if values.len() != expected {
        return Err(format!(
            "holds {} values (declared shape {:?}), the layer needs {expected}",
            values.len(),
            declared_shape(blob)
        ));
    }
    Ok(values)
}
