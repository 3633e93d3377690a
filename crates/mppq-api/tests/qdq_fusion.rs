//! Our executor runs an exported QDQ model the way ONNX Runtime does: `fuse_qdq_conv` turns each
//! DQ → Conv [→ Relu] → Q into one QLinearConv, and the fused model then computes exactly what the
//! quantization simulation computes (its integer-exact Conv path models the same kernel).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::exec::{BurnFakeQuant, Executor, OpRegistry, QuantSimulation};
use mppq_api::{QuantizeSetting, quantize_onnx_model};
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

#[test]
fn fused_qdq_export_equals_the_simulation() {
    let result = quantize_onnx_model(
        &testdata().join("tiny_cnn.onnx"),
        &testdata().join("tiny_cnn_calib"),
        QuantizeSetting::default(),
    )
    .unwrap();
    let q = &result.quantizer;
    let mut exported = mppq_api::export::formats::qdq::export_qdq(&q.model, &Default::default()).unwrap();
    let convs = exported.graph.operations().filter(|(_, op)| op.op_type == "Conv").count();
    let fused = mppq_api::ir::morph::fuse_qdq_conv(&mut exported.graph).unwrap();
    assert_eq!((convs, fused), (3, 3), "every Conv of tiny_cnn is fully quantized");
    let g = &exported.graph;
    assert_eq!(g.operations().filter(|(_, op)| op.op_type == "QLinearConv").count(), 3);
    assert!(!g.operations().any(|(_, op)| op.op_type == "Conv"), "no float Conv left");
    let opsets = |d: &str| exported.opset(d).unwrap_or(0);
    let ours = Executor::new(g, &OpRegistry::builtin(), q.device(), &opsets).unwrap();
    let sim_exec = q.executor().unwrap();
    for batch in result.calibration.first_values(None, q.device()).unwrap() {
        let mut sim = QuantSimulation::new(&q.model.graph, BurnFakeQuant);
        let want = sim_exec.run(batch.clone(), &mut [&mut sim]).unwrap();
        let got = ours.run(batch, &mut []).unwrap();
        let (a, b) = (want[0].1.as_tensor().unwrap().to_f32_vec(), got[0].1.as_tensor().unwrap().to_f32_vec());
        assert_eq!(a, b, "fused export and simulation differ");
    }
}
