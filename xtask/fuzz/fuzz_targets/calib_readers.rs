#![no_main]
//! libFuzzer entry of [`mppq_fuzz::calib_readers`]; built by `cargo xtask fuzz calib_readers`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mppq_fuzz::calib_readers(data));
