#![no_main]
//! libFuzzer entry of [`mppq_fuzz::caffe_weights`]; built by `cargo xtask fuzz caffe_weights`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mppq_fuzz::caffe_weights(data));
