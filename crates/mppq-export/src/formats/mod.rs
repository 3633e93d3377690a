//! The formats, one file (or folder) each, listed once in [`builtin`] (adding one: its file,
//! its `pub mod` line and its line in [`builtin`], all here): the exporter that writes it, and for the range tables
//! the reader that brings it back ([`crate::import`]).
//!
//! - [`qdq`]: `model.qdq.onnx`, QuantizeLinear/DequantizeLinear around every quantized tensor;
//! - [`quant_json`]: `quant.json`, every operation's precision and every tensor's parameters
//!   (read back by `--quant-config`);
//! - [`float_onnx`]: `model.float.onnx`, the float graph after the fusions;
//! - range tables, views of [`crate::ranges::rows`]: [`trt_calib_cache`], [`trt_dynamic_range`],
//!   [`ort_calib_cache`], [`qnn_encodings`];
//! - per layer: [`ncnn_table`]; parameter JSON: [`ppl_cuda_json`].

pub mod float_onnx;
pub mod ncnn_table;
pub mod ort_calib_cache;
pub mod ppl_cuda_json;
pub mod qdq;
pub mod qnn_encodings;
pub mod quant_json;
pub mod trt_calib_cache;
pub mod trt_dynamic_range;

use crate::exporter::Exporter;
use std::sync::Arc;

/// Every built-in exporter, in the order `mppq exporters` lists them.
pub fn builtin() -> Vec<Arc<dyn Exporter>> {
    vec![
        Arc::new(qdq::Qdq),
        Arc::new(quant_json::QuantJsonExporter),
        Arc::new(float_onnx::FloatOnnx),
        Arc::new(ort_calib_cache::OrtCalibCache),
        Arc::new(trt_calib_cache::TrtCalibCache),
        Arc::new(trt_dynamic_range::TrtDynamicRange),
        Arc::new(qnn_encodings::QnnEncodings),
        Arc::new(ncnn_table::NcnnTable),
        Arc::new(ppl_cuda_json::PplCudaJson),
    ]
}
