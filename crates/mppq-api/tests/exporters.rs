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

/// `Conv → op` at `opset`, saved with a 2-batch calibration folder; returns (model, calib).
fn conv_then(
    dir: &std::path::Path,
    op: mppq_api::ir::Operation,
    extra: Vec<(&str, mppq_api::ir::TensorData)>,
    opset: i64,
) -> (PathBuf, PathBuf) {
    use mppq_api::ir::{Graph, Model, Operation, TensorData, Variable};
    let mut g = Graph::new("old_opset");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.add_graph_input(x).unwrap();
    let w = g.add_initializer("w", TensorData::from_vec(vec![4, 3, 1, 1], &[0.5f32; 12]).unwrap()).unwrap();
    let (c, y) = (g.add_variable(Variable::new("c")).unwrap(), g.add_variable(Variable::new("y")).unwrap());
    g.add_operation(Operation::new("Conv", "conv").with_opset(opset), &[Some(x), Some(w)], &[Some(c)]).unwrap();
    let mut inputs = vec![Some(c)];
    for (name, value) in extra {
        inputs.push(Some(g.add_initializer(name, value).unwrap()));
    }
    g.add_operation(op.with_opset(opset), &inputs, &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let model_path = dir.join("m.onnx");
    mppq_onnx::save_model(&Model::new(g, opset), &model_path, &Default::default()).unwrap();
    let calib = dir.join("calib");
    std::fs::create_dir(&calib).unwrap();
    for b in 0..2 {
        let batch = TensorData::from_vec(vec![1, 3, 4, 4], &[0.25f32 * (b + 1) as f32; 48]).unwrap();
        mppq_api::data::npy::write_npy(&calib.join(format!("b{b}.npy")), &batch).unwrap();
    }
    (model_path, calib)
}

/// A model below opset 13 (a Squeeze with an `axes` attribute, opset 12) is converted when
/// loaded: it quantizes, and the QDQ export is at opset 13 with the axes as an input.
#[test]
fn an_old_opset_model_is_converted_and_exported() {
    use mppq_api::ir::{Attribute, Operation};
    let dir = tempfile::tempdir().unwrap();
    let squeeze = Operation::new("Squeeze", "squeeze").with_attr("axes", Attribute::Ints(vec![0]));
    let (model, calib) = conv_then(dir.path(), squeeze, Vec::new(), 12);
    let out = dir.path().join("out");
    let job =
        quantize_to_dir(&model, &calib, QuantizeSetting::default(), &out, &mut mppq_api::passes::NoProgress).unwrap();
    assert_eq!(job.opset_upgrade.unwrap().to_string(), "opset 12 → 13: rewrote 1 Squeeze");
    let qdq = mppq_onnx::load_model(out.join("model.qdq.onnx")).unwrap();
    assert_eq!(qdq.opset(""), Some(13));
    let (_, sq) = qdq.graph.operations().find(|(_, o)| o.op_type == "Squeeze").unwrap();
    assert!(sq.attr("axes").is_none() && sq.inputs()[1].is_some());
}

/// A model that cannot reach opset 13 (a Resize with `tf_half_pixel_for_nn` in linear mode,
/// opset 11, which has no form at 13) is quantized at its own opset with per-tensor weights,
/// and says why; one that cannot reach opset 10 either (Q/DQ do not exist below) is refused once
/// its configs exist, before calibration starts.
#[test]
fn a_model_that_cannot_reach_opset_13_is_quantized_per_tensor_at_its_own() {
    use mppq_api::ir::{Attribute, Operation, TensorData};
    let resize = || {
        Operation::new("Resize", "resize")
            .with_attr("mode", Attribute::String(b"linear".to_vec()))
            .with_attr("coordinate_transformation_mode", Attribute::String(b"tf_half_pixel_for_nn".to_vec()))
    };
    let extra = || {
        vec![
            ("roi", TensorData::from_vec::<f32>(vec![0], &[]).unwrap()),
            ("scales", TensorData::from_vec(vec![4], &[1.0f32, 1.0, 2.0, 2.0]).unwrap()),
        ]
    };
    let dir = tempfile::tempdir().unwrap();
    let (model_path, calib) = conv_then(dir.path(), resize(), extra(), 11);
    let out = dir.path().join("out");
    let job = quantize_to_dir(&model_path, &calib, QuantizeSetting::default(), &out, &mut mppq_api::passes::NoProgress)
        .unwrap();
    let cap = job.opset_cap.as_ref().unwrap().to_string();
    assert!(
        cap.contains("opset 11 with per-tensor weights")
            && cap.contains("`resize` (Resize, opset 11)")
            && cap.contains("tf_half_pixel_for_nn"),
        "{cap}"
    );
    let qdq = mppq_onnx::load_model(out.join("model.qdq.onnx")).unwrap();
    assert_eq!(qdq.opset(""), Some(11));
    let dq: Vec<_> = qdq.graph.operations().filter(|(_, o)| o.op_type == "DequantizeLinear").collect();
    assert!(dq.iter().all(|(_, o)| o.attr("axis").is_none()), "per-tensor only");
    // The conv weight is a baked integer initializer behind a DequantizeLinear.
    let (_, conv) = qdq.graph.operations().find(|(_, o)| o.op_type == "Conv").unwrap();
    let w = conv.inputs()[1].unwrap();
    let producer = qdq.graph.producer(w).and_then(|p| qdq.graph.operation(p).ok()).unwrap();
    assert_eq!(producer.op_type, "DequantizeLinear");

    // A per-element BatchNormalization (`spatial` = 0) at opset 8 cannot reach opset 9, so not
    // 10 either, where Q/DQ begin: refused before calibration.
    let dir = tempfile::tempdir().unwrap();
    let bn = Operation::new("BatchNormalization", "bn").with_attr("spatial", Attribute::Int(0));
    let stats = |name, v: f32| (name, TensorData::from_vec(vec![4, 4, 4], &[v; 64]).unwrap());
    let extra = vec![stats("scale", 1.0), stats("bias", 0.0), stats("mean", 0.0), stats("var", 1.0)];
    let (model_path, calib) = conv_then(dir.path(), bn, extra, 8);
    let mut progress = mppq_api::passes::RecordingProgress::default();
    let out = dir.path().join("out");
    let err = quantize_to_dir(&model_path, &calib, QuantizeSetting::default(), &out, &mut progress)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("export_preflight") && err.contains("`bn` (BatchNormalization, opset 8)"), "{err}");
    assert!(!progress.events.iter().any(|e| e.contains("calibration")), "{:?}", progress.events);
}

/// `mppq quantize d/model.float.onnx -o d` used to overwrite its own input; a failed run used to
/// leave some new files next to older ones.
#[test]
fn a_run_never_replaces_its_input_and_a_failed_run_leaves_the_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let first = quantize(QuantizeSetting::default(), dir.path()).unwrap();
    assert!(first.contains(&"model.float.onnx".to_string()), "{first:?}");
    let model = dir.path().join("model.float.onnx");
    let before = std::fs::read(&model).unwrap();
    let calib = testdata().join("tiny_cnn_calib");
    let err =
        quantize_to_dir(&model, &calib, QuantizeSetting::default(), dir.path(), &mut mppq_api::passes::NoProgress)
            .err()
            .unwrap()
            .to_string();
    assert!(err.contains("would replace this input"), "{err}");
    assert_eq!(std::fs::read(&model).unwrap(), before);

    // A run that fails (an export option refused) leaves the directory as it was.
    let listing = |d: &std::path::Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let files_before = listing(dir.path());
    let bad = setting("[export.qdq-onnx]\nopset = 9\n");
    assert!(quantize(bad, dir.path()).is_err());
    assert_eq!(listing(dir.path()), files_before);
}

/// Opset 99 and IR version 99 were quantized and written back as they were.
#[test]
fn versions_newer_than_this_build_knows_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let relu = || mppq_api::ir::Operation::new("Relu", "relu");
    let (model, calib) = conv_then(dir.path(), relu(), Vec::new(), 99);
    let out = dir.path().join("out");
    let run = |model: &std::path::Path| {
        quantize_to_dir(model, &calib, QuantizeSetting::default(), &out, &mut mppq_api::passes::NoProgress)
            .err()
            .unwrap()
            .to_string()
    };
    let err = run(&model);
    assert!(err.contains("m.onnx") && err.contains("opset 99 is newer"), "{err}");

    let newer_ir = dir.path().join("ir99.onnx");
    let at17 = dir.path().join("at17");
    std::fs::create_dir(&at17).unwrap();
    let mut m = mppq_onnx::load_model(conv_then(&at17, relu(), Vec::new(), 17).0).unwrap();
    m.ir_version = 99;
    mppq_onnx::save_model(&m, &newer_ir, &Default::default()).unwrap();
    let err = run(&newer_ir);
    assert!(err.contains("ir99.onnx") && err.contains("IR version 99 is newer"), "{err}");

    // No opset_import at IR >= 3: refused, not read as opset 1 and "converted".
    let mut none = mppq_onnx::load_model(at17.join("m.onnx")).unwrap();
    none.opset_imports.clear();
    let no_opset = dir.path().join("no_opset.onnx");
    mppq_onnx::save_model(&none, &no_opset, &Default::default()).unwrap();
    let err = run(&no_opset);
    assert!(err.contains("no_opset.onnx") && err.contains("declares no opset"), "{err}");

    // No outputs: said so, instead of an observer that "observed nothing".
    let mut no_outputs = mppq_onnx::load_model(at17.join("m.onnx")).unwrap();
    for v in no_outputs.graph.outputs().to_vec() {
        no_outputs.graph.remove_graph_output(v).unwrap();
    }
    let path = dir.path().join("no_outputs.onnx");
    mppq_onnx::save_model(&no_outputs, &path, &Default::default()).unwrap();
    let err = run(&path);
    assert!(err.contains("no_outputs.onnx") && err.contains("no outputs"), "{err}");
}
