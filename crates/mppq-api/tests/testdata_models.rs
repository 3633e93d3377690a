//! Every testdata model runs on our executor and matches ONNX Runtime's stored outputs
//! (`testdata/<model>_expected/batch_000.npz`, written by gen_testdata.py).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::data::npy;
use mppq_api::model::run;
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn check(model_name: &str) {
    let dir = testdata();
    let model = mppq_onnx::load_model(dir.join(format!("{model_name}.onnx"))).unwrap();
    let calib = dir.join(format!("{model_name}_calib"));
    let feeds = run::read_feeds(&model, &calib.join("batch_000.npz")).unwrap();
    let outputs = run::run_model(&model, feeds, &mppq_exec::Device::cpu()).unwrap();
    let expected = npy::read_npz(&dir.join(format!("{model_name}_expected/batch_000.npz"))).unwrap();
    assert_eq!(outputs.len(), expected.len());
    for (name, got) in &outputs {
        let (_, want) = expected.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(got.shape(), want.shape(), "{model_name}/{name}");
        let (g, w) = (got.to_f32_vec().unwrap(), want.to_f32_vec().unwrap());
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
        let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-4 * scale + 1e-5, "{model_name}/{name}: max abs diff {worst} (output scale {scale})");
    }
}

#[test]
fn tiny_cnn_matches_onnx_runtime() {
    check("tiny_cnn");
}

#[test]
fn tiny_transformer_matches_onnx_runtime() {
    check("tiny_transformer");
}

#[test]
fn detect_branch_matches_onnx_runtime() {
    check("detect_branch");
}

#[test]
fn tiny_mobilenet_matches_onnx_runtime() {
    check("tiny_mobilenet");
}

#[test]
fn tiny_if_matches_onnx_runtime() {
    check("tiny_if");
}

#[test]
fn tiny_opset11_matches_onnx_runtime() {
    check("tiny_opset11");
}

#[test]
fn tiny_loop_matches_onnx_runtime() {
    check("tiny_loop");
}
