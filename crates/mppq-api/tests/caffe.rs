//! Caffe nets (`testdata/caffe`, written by `xtask/python/caffe_check.py`) converted by
//! `mppq_onnx::load_caffe` run on our executor and match OpenCV dnn's outputs, stored with them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::{npy, run};
use std::path::PathBuf;

const NETS: [&str; 9] = [
    "conv_inplace",
    "pooling",
    "batchnorm_scale",
    "eltwise_concat",
    "deconv",
    "activations",
    "shapes",
    "lrn",
    "legacy_input",
];

#[test]
fn caffe_nets_match_opencv() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe");
    for name in NETS {
        let model = mppq_onnx::load_caffe(dir.join(format!("{name}.prototxt")), dir.join(format!("{name}.caffemodel")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let feeds = run::read_feeds(&model, &dir.join(format!("{name}_input.npz"))).unwrap();
        let outputs = run::run_model(&model, feeds, &mppq_exec::Device::cpu()).unwrap();
        let expected = npy::read_npz(&dir.join(format!("{name}_expected.npz"))).unwrap();
        assert_eq!(outputs.len(), expected.len(), "{name}: outputs");
        for (out, want) in &expected {
            let (_, got) = outputs.iter().find(|(n, _)| n == out).unwrap_or_else(|| panic!("{name}: no output {out}"));
            assert_eq!(got.shape(), want.shape(), "{name}/{out}");
            let (g, w) = (got.to_f32_vec().unwrap(), want.to_f32_vec().unwrap());
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= 1e-4 * scale + 1e-5, "{name}/{out}: max abs diff {worst} (output scale {scale})");
        }
    }
}
