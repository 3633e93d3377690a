//! The formats, one file (or folder) each: the exporter that writes it, and for the range tables
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
