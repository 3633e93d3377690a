//! Weight-only quantization on calibration data: passes that improve block-wise weights
//! ([`mppq_ir::quant::block`]) beyond round-to-nearest (which `parameter_quantize` gives them).
//! They do nothing on a graph without block-wise configs.

pub mod awq;
pub mod gptq;
