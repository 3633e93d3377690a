//! The front door of mppq: the Rust API and the `mppq` command-line program.
//!
//! It owns what a user touches directly, one room per kind of knowledge:
//! - [`model`]: inspection ([`model::info`]), the opset a model is quantized at
//!   ([`model::upgrade`]), running it on NumPy data ([`model::run`]);
//! - [`data`]: NumPy files and calibration sets (NumPy batches, raw `.bin` files, image folders
//!   with their preprocessing; bounded in memory);
//! - [`platform`]: who runs the quantized model — the trait, its registry, the model-format
//!   parsers and the built-in platforms (register your own dispatcher/quantizer/operators/exporter
//!   bundle);
//! - [`quantize`]: the run — admission checks, the [`ModelQuantizer`] (`load_quantizer` →
//!   `quantize` → `export_to`, and the one-call [`quantize_onnx_model`]), its setting file,
//!   If/Loop bodies, the accuracy budget and the command-line jobs;
//! - exporters and the formats they write live in `mppq-export` (re-exported as [`export`]); a
//!   platform names its defaults, [`quantize`] runs them;
//! - [`report`]: error analysis (graph-wise, layer-wise, HTML and JSON);
//! - [`qat`]: quantization-aware training of the quantized graph;
//! - [`staging`]: outputs that appear together and never replace an input.
//!
//! The CLI in `src/bin/mppq.rs` is a thin layer over these functions.
//!
//! The lower crates are re-exported, so a user crate can depend on `mppq-api` alone.

pub mod data;
pub mod error;
pub mod model;
pub mod platform;
pub mod qat;
pub mod quantize;
pub mod report;
pub mod staging;

pub use data::calib::CalibrationSet;
pub use error::{ApiError, Result};
pub use export::{Artifact, Exporter, exporter_by_name, register_exporter};
pub use model::info::ModelInfo;
pub use platform::parser::{Parser, register_parser};
pub use platform::{Platform, QuantizerOptions, platform_by_name, register_platform};
pub use quantize::setting::QuantizeSetting;
pub use quantize::{ModelQuantizer, QuantizedModel, load_quantizer, quantize_onnx_model};

pub use mppq_dispatch as dispatch;
pub use mppq_exec as exec;
pub use mppq_export as export;
pub use mppq_ir as ir;
pub use mppq_onnx as onnx;
pub use mppq_passes as passes;
pub use mppq_quant as quant;
