//! The Caffe frontend: a `.prototxt` (the net, protobuf text format) and a `.caffemodel` (the
//! trained blobs, binary protobuf) become an [`mppq_ir::Model`] of standard ONNX operations
//! (opset 13), so everything downstream (dispatch, quantization, export) works unchanged.
//!
//! Modules: [`schema`] (prost types of our subset of BVLC's `caffe.proto`), `read` (parsing the
//! two files, legacy V1 layers, TEST-phase filtering, blobs by layer name), `convert` (the walk
//! over the net: inputs, in-place blobs as SSA values, outputs), `layers` (one conversion per
//! layer type), `shape` (Caffe's shape rules, pooling's ceil rounding among them) and `blob`
//! (blob values). What is supported and how it is verified: `docs/caffe.md`.

mod blob;
mod convert;
pub mod error;
mod layers;
mod read;
pub mod schema;
mod shape;

pub use convert::CAFFE_OPSET;
pub use error::CaffeError;
pub use layers::SUPPORTED_LAYERS;

use crate::error::Result;
use mppq_ir::Model;
use std::path::Path;

/// Loads a Caffe net: `prototxt` gives the layers, `caffemodel` the trained blobs (matched by
/// layer name; blobs written in the prototxt itself are used for layers the caffemodel lacks).
pub fn load_caffe(prototxt: impl AsRef<Path>, caffemodel: impl AsRef<Path>) -> Result<Model> {
    let (prototxt, caffemodel) = (prototxt.as_ref(), caffemodel.as_ref());
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CaffeError::Read { path: path.display().to_string(), source })
    };
    let text = read(prototxt)?;
    let text = String::from_utf8(text).map_err(|e| CaffeError::Net {
        file: prototxt.display().to_string(),
        message: format!("not UTF-8 text: {e}"),
    })?;
    let weights = read(caffemodel)?;
    load_caffe_from_bytes(&text, &weights, &prototxt.display().to_string(), &caffemodel.display().to_string())
}

/// [`load_caffe`] from the prototxt's text and the caffemodel's bytes; `prototxt_name` and
/// `caffemodel_name` appear in errors.
pub fn load_caffe_from_bytes(
    prototxt: &str,
    caffemodel: &[u8],
    prototxt_name: &str,
    caffemodel_name: &str,
) -> Result<Model> {
    let net = read::parse_prototxt(prototxt_name, prototxt)?;
    let trained = read::decode_caffemodel(caffemodel_name, caffemodel)?;
    let weights = read::Weights::new(&trained);
    Ok(convert::convert_net(prototxt_name, caffemodel_name, &net, &weights)?)
}
