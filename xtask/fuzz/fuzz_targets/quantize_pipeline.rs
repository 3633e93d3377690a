#![no_main]
//! libFuzzer entry of [`mppq_fuzz::quantize_pipeline`]; built by `cargo xtask fuzz quantize_pipeline`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mppq_fuzz::quantize_pipeline(data));
