//! The error type of the Caffe frontend: every variant names the file, and the layer (name and
//! type) or the line where the problem is.

use mppq_ir::IrError;

/// What can go wrong reading a Caffe net; converted into [`crate::OnnxError::Caffe`].
#[derive(Debug, thiserror::Error)]
pub enum CaffeError {
    #[error("cannot read `{path}`: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("`{file}`:{line}:{column}: not a Caffe net in protobuf text format: {message}")]
    Text { file: String, line: usize, column: usize, message: String },
    #[error("`{file}` is not a Caffe net in protobuf binary format (.caffemodel): {source}")]
    Decode { file: String, source: prost::DecodeError },
    #[error(
        "`{file}`: layer `{layer}` has type `{layer_type}`, which the Caffe frontend does not convert; \
         supported types: {supported}"
    )]
    UnsupportedLayer { file: String, layer: String, layer_type: String, supported: String },
    #[error("`{file}`: layer `{layer}` ({layer_type}): {message}")]
    Layer { file: String, layer: String, layer_type: String, message: String },
    #[error("`{file}`: weights of layer `{layer}` ({layer_type}): {message}")]
    Weights { file: String, layer: String, layer_type: String, message: String },
    #[error("`{file}`: {message}")]
    Net { file: String, message: String },
    #[error("`{file}`: building the graph: {source}")]
    Graph { file: String, source: IrError },
}

pub type Result<T, E = CaffeError> = std::result::Result<T, E>;
