//! Exporters from a quantized mppq IR: [`qdq`] writes a float ONNX model with
//! QuantizeLinear/DequantizeLinear pairs (what ONNX Runtime runs), [`quant_json`] writes and
//! reads back every tensor's quantization parameters as JSON.

pub mod qdq;
pub mod quant_json;

use crate::OnnxError;
use mppq_ir::IrError;

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Why an export (or a JSON import) failed: every variant names the operation and tensor, and
/// what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "operation `{op}` ({op_type}): the config of tensor `{tensor}` is in state {state} and has no scale: calibrate the model before exporting"
    )]
    NotCalibrated { op: String, op_type: String, tensor: String, state: String },
    #[error("operation `{op}` ({op_type}), tensor `{tensor}`: {message}")]
    Unsupported { op: String, op_type: String, tensor: String, message: String },
    #[error(
        "cannot raise the opset from {from} to {to} (needed for {why}): {}",
        .blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Opset { from: i64, to: i64, why: String, blockers: Vec<mppq_ir::morph::OpsetBlocker> },
    #[error("export option `{option}`: {message}")]
    BadOption { option: String, message: String },
    #[error("quantization JSON `{file}`: {message}")]
    Json { file: String, message: String },
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    #[error(transparent)]
    Ir(#[from] IrError),
}
