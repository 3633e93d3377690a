//! The outputs of `mppq quantize` are the same bytes on every run and at every thread count
//! (rayon's pool size changes how work is split, never the result).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn quantize(model: &str, threads: usize, out: &Path) -> Vec<Vec<u8>> {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_mppq"))
        .args(["quantize"])
        .arg(testdata().join(format!("{model}.onnx")))
        .arg("--calib")
        .arg(testdata().join(format!("{model}_calib")))
        .args(["--optimize", "2", "--quiet", "-o"])
        .arg(out)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{model} with {threads} thread(s)");
    ["model.qdq.onnx", "quant.json", "model.float.onnx"].iter().map(|f| std::fs::read(out.join(f)).unwrap()).collect()
}

#[test]
fn quantize_gives_the_same_bytes_across_runs_and_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["tiny_cnn", "tiny_mobilenet"] {
        let first = quantize(model, 1, &dir.path().join(format!("{model}-1")));
        for (run, threads) in [(2, 1), (3, 4)] {
            let again = quantize(model, threads, &dir.path().join(format!("{model}-{run}")));
            assert!(again == first, "{model}: run {run} with {threads} thread(s) wrote different bytes");
        }
    }
}
