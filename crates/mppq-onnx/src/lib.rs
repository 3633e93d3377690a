//! ONNX reading and writing for mppq: `.onnx` bytes or files (with external data) to the mppq
//! IR and back, losslessly.
//!
//! It owns the prost types generated from the ONNX schema kept in this crate ([`proto`]), the
//! conversions of tensors, types and attributes, model [`load`] with validation (every problem a
//! typed [`OnnxError`] naming the file and the node or field), atomic model [`save`] with
//! external data for large models (read only from files inside the model's folder:
//! [`confine`]), raising a model's opset ([`opset`]), and the Caffe frontend
//! ([`caffe`]: `.prototxt` + `.caffemodel` to the same IR).

pub mod attribute;
pub mod caffe;
pub mod confine;
pub mod error;
pub mod external;
pub mod load;
pub mod opset;
pub mod proto;
pub mod save;
pub mod tensor;
pub mod test_data;
pub mod value_type;

pub use caffe::load_caffe;
pub use error::{OnnxError, Result};
pub use load::{decode_tensor_file, load_model, load_model_from_bytes};
pub use opset::{MAX_IR_VERSION, MAX_OPSET, upgrade_model};
pub use save::{ExternalData, SaveOptions, model_to_bytes, save_model};
