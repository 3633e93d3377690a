#![no_main]
//! libFuzzer entry of [`mppq_fuzz::config_readers`]; built by `cargo xtask fuzz config_readers`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mppq_fuzz::config_readers(data));
