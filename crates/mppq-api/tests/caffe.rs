//! Caffe nets (`testdata/caffe`, written by `xtask/python/caffe_check.py`) converted by
//! `mppq_onnx::load_caffe` run on our executor and match OpenCV dnn's outputs, stored with them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::data::npy;
use mppq_api::model::run;
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

/// `mppq quantize NET.prototxt --weights NET.caffemodel`: the parser registry reads the Caffe net,
/// it quantizes like an ONNX model and exports a QDQ model that loads again; without `weights`
/// the `.caffemodel` beside the prototxt is used, and a missing one is a typed error naming it.
#[test]
fn caffe_net_quantizes_end_to_end() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe");
    let calib = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("conv_inplace_input.npz"), calib.path().join("batch_000.npz")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let setting = mppq_api::QuantizeSetting {
        weights: Some(dir.join("conv_inplace.caffemodel")),
        ..mppq_api::QuantizeSetting::default()
    };
    let job = mppq_api::quantize::quantize_to_dir(
        &dir.join("conv_inplace.prototxt"),
        calib.path(),
        setting,
        out.path(),
        &mut mppq_api::passes::NoProgress,
    )
    .unwrap();
    assert!(job.quantized_ops.0 >= 3, "{:?}", job.quantized_ops);
    let qdq = mppq_onnx::load_model(out.path().join("model.qdq.onnx")).unwrap();
    assert!(qdq.graph.operations().any(|(_, op)| op.op_type == "QuantizeLinear"));

    // The weights default to NAME.caffemodel beside NAME.prototxt; a net without one is refused.
    let model = mppq_api::platform::parser::parse_model(&dir.join("pooling.prototxt"), None).unwrap();
    assert_eq!(model.producer_name, "mppq-caffe");
    let lonely = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("pooling.prototxt"), lonely.path().join("net.prototxt")).unwrap();
    let err =
        mppq_api::platform::parser::parse_model(&lonely.path().join("net.prototxt"), None).unwrap_err().to_string();
    assert!(err.contains("--weights") && err.contains("net.caffemodel"), "{err}");
    // An ONNX model refuses a weights file rather than ignoring it.
    let onnx = dir.join("../tiny_cnn.onnx");
    let err =
        mppq_api::platform::parser::parse_model(&onnx, Some(&dir.join("pooling.caffemodel"))).unwrap_err().to_string();
    assert!(err.contains("ONNX model") && err.contains("--weights"), "{err}");
}
