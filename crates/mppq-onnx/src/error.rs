//! The error type of ONNX loading and saving: every variant names the file, and the node,
//! tensor or field where the problem is.

use mppq_ir::IrError;

pub type Result<T, E = OnnxError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("cannot read `{path}`: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("`{file}` is not a valid ONNX protobuf: {source}")]
    Decode { file: String, source: prost::DecodeError },
    #[error("`{file}`: {place}: {message}")]
    Invalid { file: String, place: String, message: String },
    #[error("`{file}`: {source}")]
    Graph { file: String, source: IrError },
    #[error("`{file}`: external data of tensor `{tensor}`: {message}")]
    ExternalData { file: String, tensor: String, message: String },
    #[error("cannot write `{path}`: {message}")]
    Write { path: String, message: String },
    /// Reading a Caffe net (`.prototxt` + `.caffemodel`).
    #[error(transparent)]
    Caffe(#[from] crate::caffe::CaffeError),
}

impl OnnxError {
    pub(crate) fn invalid(file: &str, place: impl Into<String>, message: impl Into<String>) -> Self {
        OnnxError::Invalid { file: file.to_string(), place: place.into(), message: message.into() }
    }
}
