//! Blob values: the `float` or `double` data of a `BlobProto`, checked against the shape the
//! layer needs, as Caffe checks them when it copies trained layers: the element count, and the
//! declared shape when the blob has one (leading 1s aside: legacy blobs are 4-D, `1 x 1 x N x K`
//! for an InnerProduct weight).

use super::schema::BlobProto;

/// The shape a blob declares: `shape`, else the legacy `num, channels, height, width`.
pub(crate) fn declared_shape(blob: &BlobProto) -> Vec<i64> {
    match &blob.shape {
        Some(s) => s.dim.clone(),
        None => [blob.num(), blob.channels(), blob.height(), blob.width()].iter().map(|&d| i64::from(d)).collect(),
    }
}

/// Whether the blob declares a shape other than `expected` (leading 1s aside). A blob with no
/// shape at all (legacy dimensions all 0) declares nothing.
fn contradicts(blob: &BlobProto, expected: &[usize]) -> bool {
    let declared = declared_shape(blob);
    if blob.shape.is_none() && declared.iter().all(|&d| d == 0) {
        return false;
    }
    let strip = |dims: Vec<i64>| -> Vec<i64> { dims.into_iter().skip_while(|&d| d == 1).collect() };
    strip(declared) != strip(expected.iter().map(|&d| d as i64).collect())
}

/// The blob's values as `f32`: `expected`'s element count, in a blob of that shape.
pub(crate) fn values(blob: &BlobProto, expected_shape: &[usize], expected: usize) -> Result<Vec<f32>, String> {
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
    if contradicts(blob, expected_shape) {
        return Err(format!(
            "has shape {:?}, the layer needs {expected_shape:?} (the same count, another layout: Caffe refuses it \
             too; the caffemodel was trained from another prototxt)",
            declared_shape(blob)
        ));
    }
    Ok(values)
}
