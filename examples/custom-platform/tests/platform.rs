//! The example platform, used from outside: registered, then quantizing a testdata model through
//! the one-call API and exporting it. Asserts what the platform promised: only Conv/Relu are
//! quantized, every scale is a power of two, the DSP's Relu kernel ran, and the simulation stays
//! close to float.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::exec::{BurnFakeQuant, QuantSimulation};
use mppq_api::ir::quant::TargetPrecision;
use mppq_api::{QuantizeSetting, quantize_onnx_model};
use mppq_example_custom_platform::{DSP_RELU_CALLS, register};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

#[test]
fn user_platform_quantizes_and_exports() {
    register().unwrap();
    assert!(register().is_err(), "registering twice is an error");
    let setting = QuantizeSetting { platform: "example-dsp".into(), ..Default::default() };
    let result =
        quantize_onnx_model(&testdata().join("tiny_cnn.onnx"), &testdata().join("tiny_cnn_calib"), setting).unwrap();
    let q = &result.quantizer;
    assert_eq!(q.dispatch.as_ref().unwrap().dispatcher, "conv-only");

    let graph = &q.model.graph;
    let mut quantized = 0;
    for (_, op) in graph.operations() {
        if op.precision == TargetPrecision::Int8 {
            assert!(op.op_type == "Conv" || op.op_type == "Relu", "{} ({}) was quantized", op.name, op.op_type);
            quantized += 1;
        }
        let configs = op.quant_config.iter().flat_map(|c| c.input_configs.iter().chain(&c.output_configs)).flatten();
        for c in configs.filter(|c| c.num_of_bits == 8 && c.state.is_active()) {
            let s = c.scale[0];
            assert_eq!(s.log2().fract(), 0.0, "{}: scale {s} is not a power of two", op.name);
        }
    }
    assert!(quantized >= 4, "{quantized}");

    // The platform's operator table is what runs: the DSP Relu replaced the built-in one.
    let before = DSP_RELU_CALLS.load(Ordering::Relaxed);
    let batches = result.calibration.first_values(None, q.device()).unwrap();
    let exec = q.executor().unwrap();
    let fp = exec.run(batches[0].clone(), &mut []).unwrap();
    let mut sim = QuantSimulation::new(graph, BurnFakeQuant);
    let sq = exec.run(batches[0].clone(), &mut [&mut sim]).unwrap();
    assert!(DSP_RELU_CALLS.load(Ordering::Relaxed) > before);
    let (a, b) = (fp[0].1.as_tensor().unwrap().to_f32_vec(), sq[0].1.as_tensor().unwrap().to_f32_vec());
    let snr = mppq_api::quant::metrics::snr_db(&a, &b);
    println!("example-dsp on tiny_cnn: {quantized} quantized ops, simulation SNR {snr:.2} dB");
    assert!(snr > 20.0, "SNR {snr:.2} dB");

    let dir = tempfile_dir();
    let files = q.export_to(&dir).unwrap();
    let names: Vec<_> = files.iter().map(|a| a.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["model.qdq.onnx", "dsp_shifts.txt"], "the platform's own exporters ran");
    let shifts = std::fs::read_to_string(dir.join("dsp_shifts.txt")).unwrap();
    assert!(
        shifts.lines().count() >= 3
            && shifts
                .lines()
                .all(|l| l.split(' ').nth(1).is_some_and(|s| s.parse::<f32>().is_ok_and(|v| v.fract() == 0.0))),
        "{shifts}"
    );
    let exported = mppq_api::onnx::load_model(dir.join("model.qdq.onnx")).unwrap();
    assert!(exported.graph.operations().any(|(_, op)| op.op_type == "QuantizeLinear"));
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mppq-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
