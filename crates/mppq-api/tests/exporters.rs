//! The exporter registry as users meet it: the setting file's `[export.NAME]` options reach the
//! exporter (they were ignored by `mppq quantize` before the registry), `exporters = [...]`
//! picks what is written, and bad export settings are refused before any calibration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::QuantizeSetting;
use mppq_api::quantize::quantize_to_dir;
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn setting(toml: &str) -> QuantizeSetting {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, toml).unwrap();
    QuantizeSetting::from_file(&path).unwrap()
}

/// Runs `mppq quantize` on tiny_cnn with `setting`; returns the file names it listed.
fn quantize(setting: QuantizeSetting, out: &std::path::Path) -> mppq_api::Result<Vec<String>> {
    let (model, calib) = (testdata().join("tiny_cnn.onnx"), testdata().join("tiny_cnn_calib"));
    let job = quantize_to_dir(&model, &calib, setting, out, &mut mppq_api::passes::NoProgress)?;
    Ok(job.files.iter().map(|(_, p)| p.file_name().unwrap().to_string_lossy().into_owned()).collect())
}

/// Weight initializers (rank ≥ 2) stored as float and as integers.
fn weight_forms(path: &std::path::Path) -> (usize, usize) {
    let m = mppq_onnx::load_model(path).unwrap();
    let weights: Vec<_> =
        m.graph.initializers().filter_map(|(_, v)| v.value.as_ref().filter(|t| t.rank() >= 2)).collect();
    let float = weights.iter().filter(|t| t.dtype().is_float()).count();
    (float, weights.len() - float)
}

#[test]
fn export_options_in_the_setting_file_reach_the_exporter() {
    let out = tempfile::tempdir().unwrap();
    let files = quantize(QuantizeSetting::default(), out.path()).unwrap();
    assert_eq!(files, ["model.qdq.onnx", "quant.json", "model.float.onnx", "report.html", "report.json"]);
    assert_eq!(weight_forms(&out.path().join("model.qdq.onnx")), (0, 4), "default: 4 integer weights");

    let out = tempfile::tempdir().unwrap();
    let s = setting("exporters = [\"qdq\"]\n[export.qdq]\nweights_as_integers = false\nquantize_bias = false\n");
    let files = quantize(s, out.path()).unwrap();
    assert_eq!(files, ["model.qdq.onnx", "report.html", "report.json"], "only the exporters asked for");
    assert_eq!(weight_forms(&out.path().join("model.qdq.onnx")), (4, 0), "weights_as_integers = false: float weights");
}

#[test]
fn bad_export_settings_are_refused_before_calibration() {
    let out = tempfile::tempdir().unwrap();
    let cases = [
        ("[export.qdq]\nweights_as_integer = false\n", "weights_as_integer"),
        ("exporters = [\"qdq\"]\n[export.quant-json]\n", "[export.quant-json]"),
        ("exporters = [\"onnx-qdq\"]\n", "unknown exporter `onnx-qdq`"),
        ("[export.tensorrt]\n", "unknown exporter `tensorrt`"),
    ];
    // `load_quantizer` reads the model and checks the setting; calibration comes later.
    for (toml, want) in cases {
        let model = testdata().join("tiny_cnn.onnx");
        let err = match mppq_api::load_quantizer(&model, setting(toml)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{toml:?} was accepted"),
        };
        assert!(err.contains(want), "{toml:?}: {err}");
    }
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing written");
}

/// A model the QDQ export cannot raise to opset 13 (a Squeeze with an `axes` attribute, opset
/// 12) is refused once its configs exist, before calibration starts.
#[test]
fn an_export_that_would_fail_is_refused_before_calibration() {
    use mppq_api::ir::{Attribute, Graph, Model, Operation, TensorData, Variable};
    let mut g = Graph::new("squeeze_at_12");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.add_graph_input(x).unwrap();
    let w = g.add_initializer("w", TensorData::from_vec(vec![4, 3, 1, 1], &[0.5f32; 12]).unwrap()).unwrap();
    let (c, y) = (g.add_variable(Variable::new("c")).unwrap(), g.add_variable(Variable::new("y")).unwrap());
    g.add_operation(Operation::new("Conv", "conv"), &[Some(x), Some(w)], &[Some(c)]).unwrap();
    let squeeze = Operation::new("Squeeze", "squeeze").with_attr("axes", Attribute::Ints(vec![0]));
    g.add_operation(squeeze, &[Some(c)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model_path = dir.path().join("m.onnx");
    mppq_onnx::save_model(&Model::new(g, 12), &model_path, &Default::default()).unwrap();
    let calib = dir.path().join("calib");
    std::fs::create_dir(&calib).unwrap();
    let batch = TensorData::from_vec(vec![1, 3, 4, 4], &[0.25f32; 48]).unwrap();
    mppq_api::npy::write_npy(&calib.join("b0.npy"), &batch).unwrap();

    let mut progress = mppq_api::passes::RecordingProgress::default();
    let out = dir.path().join("out");
    let err = quantize_to_dir(&model_path, &calib, QuantizeSetting::default(), &out, &mut progress)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("export_preflight") && err.contains("`squeeze` (Squeeze)"), "{err}");
    assert!(!progress.events.iter().any(|e| e.contains("calibration")), "{:?}", progress.events);
}
