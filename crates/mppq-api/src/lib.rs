//! The front door of mppq: the Rust API and the `mppq` command-line program.
//!
//! It owns what a user touches directly: model inspection ([`info`]), model formats ([`parser`]: ONNX, Caffe, the user's), running a model on NumPy
//! data ([`run`], [`npy`]), calibration data ([`calib`]: NumPy batches, raw `.bin` files, image folders with their
//! preprocessing; bounded in memory), outputs that appear together ([`staging`]), platforms ([`platform`]: register your
//! own dispatcher/quantizer/operators/exporter bundle), the quantization run ([`quantize`]: the
//! seeds' `load_quantizer` → `quantize` → `export`, and the one-call [`quantize_onnx_model`]),
//! its setting file ([`setting`]), quantization inside If branches and Loop/Scan bodies ([`control_flow`]), the exporter registry and built-in exporters ([`export`]) and
//! error analysis ([`analyse`]), quantization-aware training of the quantized graph ([`qat`]); models older than opset 13 are converted when loaded for
//! quantization ([`upgrade`]). The CLI in
//! `src/bin/mppq.rs` is a thin layer over these functions.
//!
//! The lower crates are re-exported, so a user crate can depend on `mppq-api` alone.

pub mod analyse;
pub mod budget;
pub mod calib;
pub mod control_flow;
pub mod error;
pub mod export;
pub mod info;
pub mod npy;
pub mod parser;
pub mod platform;
mod platforms;
pub mod qat;
pub mod quantize;
mod registry;
pub mod run;
pub mod setting;
pub mod staging;
pub mod upgrade;

pub use calib::CalibrationSet;
pub use error::{ApiError, Result};
pub use export::{Artifact, Exporter, exporter_by_name, register_exporter};
pub use info::ModelInfo;
pub use parser::{Parser, register_parser};
pub use platform::{Platform, QuantizerOptions, platform_by_name, register_operation, register_platform};
pub use quantize::{ModelQuantizer, QuantizedModel, load_quantizer, quantize_onnx_model};
pub use setting::QuantizeSetting;

pub use mppq_dispatch as dispatch;
pub use mppq_exec as exec;
pub use mppq_ir as ir;
pub use mppq_onnx as onnx;
pub use mppq_passes as passes;
pub use mppq_quant as quant;
