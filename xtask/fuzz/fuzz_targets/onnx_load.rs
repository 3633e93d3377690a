#![no_main]
//! libFuzzer entry of [`mppq_fuzz::onnx_load`]; built by `cargo xtask fuzz onnx_load`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mppq_fuzz::onnx_load(data));
