//! Quantization error analysis on tiny_cnn (quantized as in `mppq-quant/tests/pipeline.rs`):
//! the running sums equal metrics on full outputs, layer-wise ranks a deliberately coarse layer
//! first, samples respect their cap, reports are well-formed and NaN is a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::ApiError;
use mppq_api::report::{
    AnalyseSetting, AnalysisReport, analyse, graphwise_error, layers_to_analyse, layerwise_error, render_html,
    render_table, write_html,
};
use mppq_dispatch::{DispatchContext, TargetPrecision, dispatcher_by_name};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::Graph;
use mppq_quant::calibrate::{CalibrationSetting, calibrate};
use mppq_quant::metrics::{cosine, snr_db};
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer, init_quantization};
use std::path::PathBuf;

type Batch = Vec<(String, Value)>;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn batches(model: &str, n: usize, device: &Device) -> Vec<Batch> {
    (0..n)
        .map(|i| {
            let path = testdata().join(format!("{model}_calib/batch_{i:03}.npz"));
            mppq_api::data::npy::read_npz(&path)
                .unwrap()
                .into_iter()
                .map(|(name, data)| (name, Value::Tensor(Tensor::from_data(&data, device).unwrap())))
                .collect()
        })
        .collect()
}

/// tiny_cnn with BN folded, conservative dispatch, ORT quantizer, calibrated on 8 batches.
fn quantized_cnn() -> (Graph, Executor, Vec<Batch>) {
    let device = Device::cpu();
    let mut graph = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap().graph;
    mppq_ir::morph::fold_batchnorm(&mut graph).unwrap();
    let quantizer = OnnxRuntimeQuantizer::default();
    let ctx = DispatchContext::new(TargetPrecision::Int8, quantizer.quant_operation_types());
    dispatcher_by_name("conservative").unwrap().dispatch(&graph, &ctx).unwrap().apply(&mut graph).unwrap();
    init_quantization(&mut graph, &quantizer).unwrap();
    let exec = Executor::new(&graph, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    let data = batches("tiny_cnn", 8, &device);
    calibrate(&mut graph, &exec, &data, &CalibrationSetting::default(), |_, _, _| {}).unwrap();
    (graph, exec, data)
}

/// Makes `op`'s weight config 2-bit symmetric (range −2..1) over the same absmax.
fn make_weights_coarse(graph: &mut Graph, op: &str) {
    let id = graph.op_id(op).unwrap();
    let config = graph.operation_mut(id).unwrap().quant_config.as_mut().unwrap();
    let w = config.input_configs[1].as_mut().unwrap();
    // Symmetric weights: scale = absmax / quant_max (int8 [-128, 127] on the default platform).
    let qmax = w.quant_max as f32;
    w.num_of_bits = 2;
    w.quant_min = -2;
    w.quant_max = 1;
    w.scale.iter_mut().for_each(|s| *s *= qmax);
    w.validate().unwrap();
}

#[test]
fn graphwise_output_metrics_equal_the_metrics_of_full_outputs() {
    let (graph, exec, data) = quantized_cnn();
    let rows = graphwise_error(&graph, &exec, None, &data, &AnalyseSetting::default(), |_, _| {}).unwrap();

    // Reference: keep whole outputs, as pipeline.rs does.
    let (mut fp_all, mut q_all) = (Vec::new(), Vec::new());
    for batch in &data {
        let fp = exec.run(batch.clone(), &mut []).unwrap();
        let mut sim = QuantSimulation::new(&graph, BurnFakeQuant);
        let q = exec.run(batch.clone(), &mut [&mut sim]).unwrap();
        fp_all.extend(fp[0].1.as_tensor().unwrap().to_f32_vec());
        q_all.extend(q[0].1.as_tensor().unwrap().to_f32_vec());
    }
    let out = rows.iter().find(|r| r.graph_output).unwrap();
    assert_eq!(out.tensor, "logits");
    assert_eq!(out.op_type, "Gemm");
    assert_eq!(out.elements as usize, fp_all.len());
    let direct = snr_db(&fp_all, &q_all);
    println!("logits: running-sum SNR {:.9} dB, direct {direct:.9} dB", out.snr_db);
    assert!(direct.is_finite() && direct > 25.0, "{direct}");
    assert!((out.snr_db - direct).abs() < 1e-6, "{} vs {direct}", out.snr_db);
    assert!((out.cosine - cosine(&fp_all, &q_all)).abs() < 1e-12);
    let mse = fp_all.iter().zip(&q_all).map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2)).sum::<f64>()
        / fp_all.len() as f64;
    assert!((out.mse - mse).abs() <= 1e-12 * mse.max(1.0), "{} vs {mse}", out.mse);

    // Watched: the quantized computing ops (3 Conv + the Gemm), in execution order.
    let types: Vec<&str> = rows.iter().map(|r| r.op_type.as_str()).collect();
    assert_eq!(types, ["Conv", "Conv", "Conv", "Gemm"]);
    // Errors accumulate: every tensor is measurably quantized but still close.
    for r in &rows {
        assert!(r.snr_db > 20.0 && r.snr_db < 80.0, "{}: {}", r.tensor, r.snr_db);
        assert!(r.cosine > 0.99 && r.cosine < 1.0, "{}: {}", r.tensor, r.cosine);
    }
}

#[test]
fn identical_runs_have_cosine_one_and_no_error() {
    // The float graph: no configs, so the "quantized" run is the float run.
    let device = Device::cpu();
    let graph = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap().graph;
    let exec = Executor::new(&graph, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    let data = batches("tiny_cnn", 2, &device);
    let rows = graphwise_error(&graph, &exec, None, &data, &AnalyseSetting::default(), |_, _| {}).unwrap();
    assert_eq!(rows.len(), 1, "only the graph output is watched");
    assert!((rows[0].cosine - 1.0).abs() < 1e-12, "{}", rows[0].cosine);
    assert_eq!(rows[0].snr_db, f64::INFINITY);
    assert_eq!(rows[0].mse, 0.0);
    assert!(layerwise_error(&graph, &exec, None, &data, |_, _| {}).unwrap().is_empty());
}

#[test]
fn layerwise_ranks_the_coarse_layer_first_and_reports_progress() {
    let (mut graph, exec, data) = quantized_cnn();
    make_weights_coarse(&mut graph, "conv2");
    let data = &data[..3];
    let layers = layers_to_analyse(&graph).unwrap();
    let mut calls = Vec::new();
    let ranked = layerwise_error(&graph, &exec, None, data, |d, t| calls.push((d, t))).unwrap();
    assert_eq!(ranked.len(), layers.len());
    assert_eq!(calls.len(), layers.len() * 3);
    assert_eq!(calls.last(), Some(&(layers.len() * 3, layers.len() * 3)));
    for l in &ranked {
        println!("{:>10} {:<18} {:8.2} dB", l.op, l.op_type, l.snr_db);
    }
    assert_eq!(ranked[0].op, "conv2");
    // 2-bit weights hurt far more than any int8 layer.
    assert!(ranked[0].snr_db < 20.0, "{}", ranked[0].snr_db);
    assert!(ranked[1].snr_db > ranked[0].snr_db + 10.0, "{} vs {}", ranked[1].snr_db, ranked[0].snr_db);
    assert!(ranked.windows(2).all(|w| w[0].snr_db <= w[1].snr_db));

    // The report's tables and chart agree.
    let setting = AnalyseSetting { layerwise: true, sample_cap: 256, ..Default::default() };
    let report = analyse("tiny_cnn", &graph, &exec, None, data, &setting, |_, _, _| {}).unwrap();
    let table = render_table(&report, 100);
    println!("{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 100));
    // Rows fit whole: every row's bar is closed.
    assert!(table.lines().filter(|l| l.contains(" Conv ")).all(|l| l.ends_with('|')), "{table}");
    let layer_table = table.split("layer-wise").nth(1).unwrap();
    let first_row = layer_table.lines().nth(2).unwrap();
    assert!(first_row.trim_start().starts_with("1 conv2 "), "{first_row}");
    assert_eq!(table, render_table(&report, 100), "deterministic");
    // Default histogram: the worst layer's output.
    assert_eq!(report.default_histogram_tensor().unwrap().op, "conv2");
}

#[test]
fn samples_stay_within_the_cap() {
    let (graph, exec, data) = quantized_cnn();
    let setting = AnalyseSetting { sample_cap: 64, ..Default::default() };
    let rows = graphwise_error(&graph, &exec, None, &data, &setting, |_, _| {}).unwrap();
    for r in &rows {
        assert_eq!(r.sample.len(), 64.min(r.elements as usize), "{}", r.tensor);
        assert_eq!(r.sample.fp.len(), r.sample.q.len());
    }
    // The logits (8 batches × 2 × 10) and the Conv outputs all exceed 64 values.
    assert!(rows.iter().all(|r| r.elements > 64));
}

/// Checks that every tag is closed in order (XHTML-style), returns the number of elements.
fn well_formed(html: &str) -> usize {
    let body = html.strip_prefix("<!DOCTYPE html>").unwrap();
    let mut stack: Vec<String> = Vec::new();
    let mut elements = 0;
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').unwrap() + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "unclosed tag near {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else {
            elements += 1;
            let name = tag.split([' ', '/']).next().unwrap().to_string();
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    elements
}

#[test]
fn html_report_has_one_bar_per_layer_and_is_well_formed() {
    let (mut graph, exec, data) = quantized_cnn();
    make_weights_coarse(&mut graph, "conv2");
    let setting = AnalyseSetting { layerwise: true, ..Default::default() };
    let report = analyse("tiny_cnn <&>", &graph, &exec, None, &data[..2], &setting, |_, _, _| {}).unwrap();
    let layers = report.layerwise.as_ref().unwrap().len();
    assert!(layers >= 8, "{layers}");
    let html = render_html(&report, None).unwrap();
    assert_eq!(html.matches(r#"<rect class="bar""#).count(), layers);
    assert!(well_formed(&html) > 50);
    assert!(html.contains("tiny_cnn &lt;&amp;&gt;"), "names are escaped");
    assert!(!html.contains("<script") && !html.contains("href=") && !html.contains("src="), "self-contained");
    // Overlaid histograms of the worst layer's output: float and quantized bars.
    assert!(html.matches(r#"class="hist-fp""#).count() > 5);
    assert!(html.matches(r#"class="hist-q""#).count() > 1);

    // A chosen tensor, an unknown one, and the atomic write next to the test outputs.
    assert!(render_html(&report, Some("logits")).unwrap().contains("Values of logits"));
    let err = render_html(&report, Some("nope")).unwrap_err();
    assert!(matches!(&err, ApiError::Analysis { tensor, .. } if tensor == "nope"), "{err}");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("analyse");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report.html");
    write_html(&report, None, &path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), html);
    println!("HTML report: {}", path.display());
}

#[test]
fn json_report_round_trips_with_null_for_infinite_snr() {
    let (graph, exec, data) = quantized_cnn();
    let mut report =
        analyse("tiny_cnn", &graph, &exec, None, &data[..2], &AnalyseSetting::default(), |_, _, _| {}).unwrap();
    report.graphwise[0].snr_db = f64::INFINITY;
    let json = report.to_json().unwrap();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["schema"], 1);
    assert_eq!(value["batches"], 2);
    assert!(value["graphwise"][0]["snr_db"].is_null());
    assert_eq!(value["graphwise"][3]["tensor"], "logits");
    assert!(value["layerwise"].is_null());
    let back: AnalysisReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.graphwise[0].snr_db, f64::INFINITY);
    assert_eq!(back.graphwise[3].snr_db, report.graphwise[3].snr_db);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("analysis.json");
    report.write_json(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), json);
}

#[test]
fn nan_in_the_data_is_a_typed_error_naming_the_tensor() {
    let (graph, exec, mut data) = quantized_cnn();
    let device = Device::cpu();
    let (name, value) = data[1].pop().unwrap();
    let t = value.as_tensor().unwrap();
    let mut values = t.to_f32_vec();
    values[5] = f32::NAN;
    data[1].push((name, Value::Tensor(Tensor::from_f32(&t.shape(), values, &device))));
    let err = graphwise_error(&graph, &exec, None, &data[..2], &AnalyseSetting::default(), |_, _| {}).unwrap_err();
    match &err {
        ApiError::Analysis { tensor, message } => {
            assert!(!tensor.is_empty());
            assert!(message.contains("NaN") && message.contains("batch 1"), "{message}");
        }
        other => panic!("expected an analysis error, got {other}"),
    }
    let err = layerwise_error(&graph, &exec, None, &data[..2], |_, _| {}).unwrap_err();
    assert!(
        matches!(&err, ApiError::Analysis { tensor, message } if tensor == "logits" && message.contains("NaN")),
        "{err}"
    );
    let err = graphwise_error(&graph, &exec, None, &[], &AnalyseSetting::default(), |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("no batches"), "{err}");
}
