//! Quantization inside If branches (testdata/tiny_if: a Conv stem, then an If on the bool input
//! `wide` choosing a narrow or a wide Conv head that reads the stem from the enclosing scope).
//! Both branches are taken by the calibration batches, so both are quantized; the simulation
//! follows the configs into the branches, the QDQ export puts Q/DQ inside them, and the
//! quantization JSON carries them (ONNX Runtime on the export: `xtask qdq-check --model tiny_if`).
//! Loop bodies the same way, calibrated on recorded iterations (testdata/tiny_loop; ONNX Runtime:
//! `xtask qdq-check --model tiny_loop`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::QuantizeSetting;
use mppq_api::quantize::quantize_to_dir;
use mppq_ir::{Attribute, Graph};
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn branch<'a>(g: &'a Graph, attr: &str) -> &'a Graph {
    let (_, op) = g.operations().find(|(_, op)| op.op_type == "If").unwrap();
    match op.attr(attr).unwrap() {
        Attribute::Graph(b) => b,
        other => panic!("{attr}: {other:?}"),
    }
}

fn count(g: &Graph, ty: &str) -> usize {
    g.operations().filter(|(_, op)| op.op_type == ty).count()
}

#[test]
fn both_if_branches_are_quantized_simulated_and_exported() {
    let out = tempfile::tempdir().unwrap();
    let (model, calib) = (testdata().join("tiny_if.onnx"), testdata().join("tiny_if_calib"));
    let job =
        quantize_to_dir(&model, &calib, QuantizeSetting::default(), out.path(), &mut mppq_api::passes::NoProgress)
            .unwrap();
    // Main graph: stem Conv + Relu; each branch: Conv, Relu, GlobalAveragePool, Flatten, Gemm.
    assert_eq!(job.quantized_ops.1, 13, "operations counted inside the branches too");
    assert!(job.quantized_ops.0 >= 8, "{:?}", job.quantized_ops);
    let report = job.pass_reports.iter().find(|r| r.starts_with("control_flow")).unwrap();
    assert!(report.contains("then_branch") && report.contains("else_branch"), "{report}");
    // The simulation of the quantized branches is measured: not float (inf), not broken.
    let snr = job.analysis.as_ref().unwrap().outputs().next().unwrap().snr_db;
    assert!(snr.is_finite() && snr > 35.0, "logits SNR {snr} dB");

    let qdq = mppq_onnx::load_model(out.path().join("model.qdq.onnx")).unwrap();
    for attr in ["then_branch", "else_branch"] {
        let b = branch(&qdq.graph, attr);
        // Conv weight + bias, Gemm weight + bias, the activations: DequantizeLinear inside.
        assert!(count(b, "DequantizeLinear") >= 6, "{attr}: {}", count(b, "DequantizeLinear"));
    }
    // The stem's output is read by the branches by name: the quantized value keeps that name.
    let producer = qdq.graph.var_id("stem_out").and_then(|v| qdq.graph.producer(v)).unwrap();
    assert_eq!(qdq.graph.operation(producer).unwrap().op_type, "DequantizeLinear");

    // The JSON carries the branches' configs, and applying it reproduces the simulation.
    let json = mppq_export::formats::quant_json::read_quant_json(out.path().join("quant.json")).unwrap();
    assert_eq!(json.subgraphs.len(), 2, "{:?}", json.subgraphs.keys().collect::<Vec<_>>());
    let mut float = mppq_onnx::load_model(out.path().join("model.float.onnx")).unwrap();
    mppq_export::formats::quant_json::apply_quant_json(&mut float.graph, &json).unwrap();
    let then = branch(&float.graph, "then_branch");
    assert!(then.operations().any(|(_, op)| op.quant_config.is_some()));
}

#[test]
fn a_loop_body_is_quantized_from_its_iterations_simulated_and_exported() {
    let out = tempfile::tempdir().unwrap();
    let (model, calib) = (testdata().join("tiny_loop.onnx"), testdata().join("tiny_loop_calib"));
    let job =
        quantize_to_dir(&model, &calib, QuantizeSetting::default(), out.path(), &mut mppq_api::passes::NoProgress)
            .unwrap();
    // 8 calibration batches x 3 iterations; the body's Gemm, Relu, MatMul (on a weight of the
    // enclosing graph) and Add quantized, its Identity on the condition not.
    let report = job.pass_reports.iter().find(|r| r.starts_with("control_flow")).unwrap();
    assert!(report.contains("Loop `loop` body: 4 of 5 operations quantized (24 iterations recorded)"), "{report}");
    let snr = job.analysis.as_ref().unwrap().outputs().next().unwrap().snr_db;
    assert!(snr.is_finite() && snr > 35.0, "logits SNR {snr} dB");

    let qdq = mppq_onnx::load_model(out.path().join("model.qdq.onnx")).unwrap();
    let (_, lp) = qdq.graph.operations().find(|(_, op)| op.op_type == "Loop").unwrap();
    let Some(Attribute::Graph(body)) = lp.attr("body") else { panic!("no body") };
    // Gemm weight + bias, the shared MatMul weight, and the activations.
    assert!(count(body, "DequantizeLinear") >= 6, "{}", count(body, "DequantizeLinear"));
    let json = mppq_export::formats::quant_json::read_quant_json(out.path().join("quant.json")).unwrap();
    assert_eq!(json.subgraphs.len(), 1, "{:?}", json.subgraphs.keys().collect::<Vec<_>>());
}
