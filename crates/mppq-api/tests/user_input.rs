//! What a user feeds in that used to succeed silently with a wrong result: each case is a
//! generated reproducer from the hostile-input findings of issue 16, now refused up front with
//! an error naming the thing and the fix (or, for `--bits`, doing what the flag says).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::quantize::quantize_to_dir;
use mppq_api::{QuantizeSetting, quantize_onnx_model};
use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn quantize(model: &Path, setting: QuantizeSetting, out: &Path) -> Result<mppq_api::quantize::JobSummary, String> {
    quantize_to_dir(model, &testdata().join("tiny_cnn_calib"), setting, out, &mut mppq_api::passes::NoProgress)
        .map_err(|e| e.to_string())
}

/// A QDQ model given back to `mppq quantize` is refused (it used to be quantized a second time).
#[test]
fn an_already_quantized_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    quantize(&testdata().join("tiny_cnn.onnx"), QuantizeSetting::default(), &first).unwrap();
    let err =
        quantize(&first.join("model.qdq.onnx"), QuantizeSetting::default(), &dir.path().join("again")).err().unwrap();
    assert!(err.contains("model.qdq.onnx") && err.contains("already quantized"), "{err}");
    assert!(!dir.path().join("again").join("model.qdq.onnx").exists());
}

/// A quant JSON listing no (or not all) operations, or with a zero point outside the integer
/// range, is refused (it used to run those operations in float, or accept 1e30).
#[test]
fn incomplete_or_impossible_quant_json_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q");
    quantize(&testdata().join("tiny_cnn.onnx"), QuantizeSetting::default(), &out).unwrap();
    let text = std::fs::read_to_string(out.join("quant.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let apply = |json: &serde_json::Value| {
        let path = dir.path().join("edited.json");
        std::fs::write(&path, serde_json::to_string(json).unwrap()).unwrap();
        let mut model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        mppq_api::quantize::apply_quant_config(&mut model, &path, &Default::default()).map_err(|e| e.to_string())
    };
    apply(&json).unwrap();

    let mut empty = json.clone();
    empty["operations"] = serde_json::json!({});
    let err = apply(&empty).unwrap_err();
    assert!(err.contains("edited.json") && err.contains("lists 0 of the graph's"), "{err}");

    let mut partial = json.clone();
    let first = partial["operations"].as_object().unwrap().keys().next().unwrap().clone();
    partial["operations"].as_object_mut().unwrap().remove(&first);
    let err = apply(&partial).unwrap_err();
    assert!(err.contains(&format!("missing `{first}`")), "{err}");

    // The first asymmetric (uint8) activation config gets a zero point of 1e30.
    let mut huge = json.clone();
    let ops = huge["operations"].as_object_mut().unwrap();
    let slot = ops
        .values_mut()
        .filter_map(|op| op["outputs"].as_array_mut())
        .flatten()
        .find(|t| t["zero_point"].as_array().is_some_and(|z| z.len() == 1) && t["quant_max"] == 255)
        .expect("an asymmetric activation");
    slot["zero_point"] = serde_json::json!([1e30]);
    let err = apply(&huge).unwrap_err();
    assert!(err.contains("zero point") && err.contains("[0, 255]"), "{err}");
}

/// `--platform lowbit --bits 8` sets the activations only (it used to make the weights 8-bit
/// too), and `--bits 9` blames the activation bits (it blamed `weight_bits`).
#[test]
fn bits_are_the_activations_bits() {
    let mut setting = QuantizeSetting { platform: "lowbit".into(), ..Default::default() };
    setting.quantizer.bits = Some(8);
    let result =
        quantize_onnx_model(&testdata().join("tiny_cnn.onnx"), &testdata().join("tiny_cnn_calib"), setting).unwrap();
    let g = &result.quantizer.model.graph;
    let conv = g.operations().find(|(_, op)| op.op_type == "Conv").unwrap().1;
    let configs = conv.quant_config.as_ref().unwrap();
    assert_eq!(configs.input_configs[1].as_ref().unwrap().num_of_bits, 4, "weights keep lowbit's 4 bits");
    assert_eq!(configs.input_configs[0].as_ref().unwrap().num_of_bits, 8);

    let mut nine = QuantizeSetting { platform: "lowbit".into(), ..Default::default() };
    nine.quantizer.bits = Some(9);
    let err = mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), nine).err().unwrap().to_string();
    assert!(err.contains("activation_bits") && !err.contains("weight_bits"), "{err}");
}

/// `analysis.batches = 0` is refused (it was raised to 1 without a word).
#[test]
fn zero_analysis_batches_are_refused() {
    let mut setting = QuantizeSetting::default();
    setting.analysis.batches = Some(0);
    let err = mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), setting).err().unwrap().to_string();
    assert!(err.contains("analysis.batches = 0"), "{err}");
}

/// An `--ignore` item that matches nothing is refused with the model's types (a typo used to
/// quantize everything).
#[test]
fn ignore_items_that_match_nothing_are_refused() {
    for item in ["Sofmax", "conv[12]", "blocks.*"] {
        let setting = QuantizeSetting { ignore: vec![item.into()], ..Default::default() };
        let err = mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), setting).err().unwrap().to_string();
        assert!(err.contains(&format!("ignore `{item}` matches no operation")) && err.contains("Conv"), "{err}");
    }
    for item in ["Conv", "conv*", "relu?"] {
        let setting = QuantizeSetting { ignore: vec![item.into()], ..Default::default() };
        assert!(mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), setting).is_ok(), "{item}");
    }
}

/// An `--ignore` item naming an operation exactly ignores it (a bare word was taken as an op
/// type only: accepted by the check, ignored by the dispatch).
#[test]
fn ignore_by_exact_operation_name_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let setting = QuantizeSetting { ignore: vec!["conv1".into()], ..Default::default() };
    quantize(&testdata().join("tiny_cnn.onnx"), setting, &dir.path().join("q")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("q/quant.json")).unwrap()).unwrap();
    let precision = json["operations"]["conv1"]["precision"].as_str().unwrap_or_default().to_string();
    assert_eq!(precision, "fp32", "conv1");
}

/// Settings serde accepts but no run can use are refused up front, naming the key, whatever the
/// setting came from (they were taken as they came: 0 batches, NaN ratios, 4e9 histogram bins
/// with the default observer, unbounded loop counts, no exporter at all).
#[test]
fn unusable_settings_are_refused_naming_the_key() {
    type Change = Box<dyn Fn(&mut QuantizeSetting)>;
    let cases: Vec<(&str, Change)> = vec![
        ("bias_correction.batches = 0", Box::new(|s| s.pipeline.bias_correction.batches = 0)),
        ("bias_correction.rounds = 1000000000", Box::new(|s| s.pipeline.bias_correction.rounds = 1_000_000_000)),
        ("mixed_range_concat.ratio = NaN", Box::new(|s| s.pipeline.mixed_range_concat.ratio = f32::NAN)),
        ("calibration.bins = 4000000000", Box::new(|s| s.pipeline.calibration.bins = 4_000_000_000)),
        ("calibration.bins = 1", Box::new(|s| s.pipeline.calibration.bins = 1)),
        ("block_reconstruction.steps = 1000000000000", Box::new(|s| s.pipeline.block_reconstruction.steps = 1 << 40)),
        ("equalization.iterations = 0", Box::new(|s| s.pipeline.equalization.iterations = 0)),
        ("max_tensor_mib = 0", Box::new(|s| s.max_tensor_mib = Some(0))),
        ("max_loop_iterations = 0", Box::new(|s| s.max_loop_iterations = Some(0))),
        ("exporters = []", Box::new(|s| s.exporters = Some(Vec::new()))),
    ];
    for (expected, change) in cases {
        let mut setting = QuantizeSetting::default();
        change(&mut setting);
        let err = mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), setting).err().unwrap().to_string();
        let key = expected.split(" = ").next().unwrap();
        assert!(err.contains(key), "{expected}: {err}");
    }
}

/// Data options that name nothing here are refused (they were ignored): an input shape for an
/// input the model lacks or for data that are not raw files, image options for `.npy` data.
#[test]
fn data_options_that_name_nothing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |change: &dyn Fn(&mut QuantizeSetting)| {
        let mut setting = QuantizeSetting::default();
        change(&mut setting);
        quantize(&testdata().join("tiny_cnn.onnx"), setting, &dir.path().join("q")).err().unwrap()
    };
    let err = run(&|s| {
        s.data.input_shape.insert("nosuch".into(), vec![1, 3, 32, 32]);
    });
    assert!(err.contains("`nosuch`, which is no input") && err.contains("input"), "{err}");
    let err = run(&|s| {
        s.data.input_shape.insert(String::new(), vec![1, 3, 32, 32]);
    });
    assert!(err.contains("applies to raw `.bin` files"), "{err}");
    let err = run(&|s| s.data.image.resize = Some("32".into()));
    assert!(err.contains("image options") && err.contains("`.npy`/`.npz`"), "{err}");
}

/// A calibration folder with symbolic links back to itself is read once per real file (two
/// loops walked exponentially; one counted an image as 41 batches, silently).
#[cfg(unix)]
#[test]
fn calibration_folders_with_link_loops_are_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let calib = dir.path().join("calib");
    std::fs::create_dir(&calib).unwrap();
    let first =
        std::fs::read_dir(testdata().join("tiny_cnn_calib")).unwrap().flatten().map(|e| e.path()).min().unwrap();
    std::fs::copy(&first, calib.join("a.npz")).unwrap();
    std::os::unix::fs::symlink(&calib, calib.join("loop1")).unwrap();
    std::os::unix::fs::symlink(&calib, calib.join("loop2")).unwrap();
    let model = mppq_api::onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let set = mppq_api::data::calib::CalibrationSet::from_path(&model, &calib, None).unwrap();
    assert_eq!(set.len(), 1);
    assert!(set.notes().iter().any(|n| n.contains("2 link(s) lead to data already read")), "{:?}", set.notes());
}

/// An operator whose output size comes from data (Tile, Pad, Expand, ConstantOfShape) and would
/// exceed the tensor budget is an error naming the node, not an allocation abort; the budget is
/// the user's to set.
#[test]
fn absurd_output_sizes_are_errors_not_aborts() {
    use mppq_api::ir::{Graph, Model, Operation, TensorData};
    let model = |op: &str, second: TensorData, extra: Option<TensorData>| {
        let mut g = Graph::new("g");
        let x = g.ensure_variable("x");
        g.add_graph_input(x).unwrap();
        let s = g.add_initializer("s", second).unwrap();
        let mut inputs = vec![Some(x), Some(s)];
        if let Some(e) = extra {
            inputs.push(Some(g.add_initializer("e", e).unwrap()));
        }
        let y = g.ensure_variable("y");
        let input = if op == "ConstantOfShape" { &inputs[1..2] } else { &inputs[..] };
        g.add_operation(Operation::new(op, "huge"), input, &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        Model::new(g, 17)
    };
    let x = TensorData::from_vec(vec![2, 2], &[1f32, 2., 3., 4.]).unwrap();
    let cases = [
        ("Tile", TensorData::from_vec(vec![2], &[1i64 << 20, 1 << 20]).unwrap(), None),
        ("Expand", TensorData::from_vec(vec![4], &[1i64 << 20, 1 << 20, 2, 2]).unwrap(), None),
        ("Pad", TensorData::from_vec(vec![4], &[0i64, 0, 1 << 40, 1 << 40]).unwrap(), None),
        ("ConstantOfShape", TensorData::from_vec(vec![2], &[1i64 << 30, 1 << 30]).unwrap(), None),
    ];
    for (op, second, extra) in cases {
        let m = model(op, second, extra);
        let feeds = vec![("x".to_string(), x.clone())];
        let device = mppq_api::exec::Device::cpu();
        let err = mppq_api::model::run::run_model(&m, feeds, &device).unwrap_err().to_string();
        assert!(err.contains("huge") && err.contains(op) && err.contains("MiB one tensor may take"), "{op}: {err}");
    }
    // A user's budget refuses what the default allows: 64 MiB for a 2 x 2^22 Tile (also 64 MiB: allowed)
    // and a 2 x 2^23 one (128 MiB: refused).
    mppq_api::exec::budget::set_max_tensor_bytes(64 << 20);
    let run = |reps: i64| {
        let m = model("Tile", TensorData::from_vec(vec![2], &[1i64, reps]).unwrap(), None);
        let feeds = vec![("x".to_string(), x.clone())];
        mppq_api::model::run::run_model(&m, feeds, &mppq_api::exec::Device::cpu())
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert!(run(1 << 22).is_ok());
    assert!(run(1 << 23).unwrap_err().contains("over the 64 MiB"));
    // Broadcasting and MatMul: [4096, 1] with [1, 8192] gives 2^25 elements (128 MiB) from
    // inputs of 16 and 32 KiB.
    let column = TensorData::from_vec(vec![4096, 1], &vec![1f32; 4096]).unwrap();
    let row = TensorData::from_vec(vec![1, 8192], &vec![1f32; 8192]).unwrap();
    for op in ["Add", "Sum", "MatMul"] {
        let m = model(op, row.clone(), None);
        let feeds = vec![("x".to_string(), column.clone())];
        let err = mppq_api::model::run::run_model(&m, feeds, &mppq_api::exec::Device::cpu()).unwrap_err().to_string();
        assert!(err.contains("huge") && err.contains(op) && err.contains("over the 64 MiB"), "{op}: {err}");
    }
    mppq_api::exec::budget::set_max_tensor_bytes(0);
}

/// A NaN weight or a negative BatchNormalization variance is blamed on the model (it used to
/// read "observed NaN ...; calibration data must be finite").
#[test]
fn damaged_weights_are_blamed_on_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let (id, name) = {
        let g = &m.graph;
        let (id, v) = g.initializers().find(|(_, v)| v.value.as_ref().is_some_and(|t| t.len() > 4)).unwrap();
        (id, v.name.clone())
    };
    let t = m.graph.variable(id).unwrap().value.clone().unwrap();
    let mut values = t.to_f32_vec().unwrap();
    values[3] = f32::NAN;
    m.graph.variable_mut(id).unwrap().value =
        Some(mppq_api::ir::TensorData::from_vec(t.shape().to_vec(), &values).unwrap());
    let path = dir.path().join("nan.onnx");
    mppq_onnx::save_model(&m, &path, &Default::default()).unwrap();
    let err = mppq_api::load_quantizer(&path, QuantizeSetting::default()).err().unwrap().to_string();
    assert!(
        err.contains("nan.onnx") && err.contains(&format!("`{name}`")) && err.contains("NaN at flat index 3"),
        "{err}"
    );
}

#[test]
fn a_negative_batchnorm_variance_is_blamed_on_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let (bn, var) = {
        let g = &m.graph;
        let (_, op) = g.operations().find(|(_, op)| op.op_type == "BatchNormalization").unwrap();
        (op.name.clone(), op.inputs()[4].unwrap())
    };
    let t = m.graph.variable(var).unwrap().value.clone().unwrap();
    let mut values = t.to_f32_vec().unwrap();
    values[1] = -0.25;
    m.graph.variable_mut(var).unwrap().value =
        Some(mppq_api::ir::TensorData::from_vec(t.shape().to_vec(), &values).unwrap());
    let path = dir.path().join("bn.onnx");
    mppq_onnx::save_model(&m, &path, &Default::default()).unwrap();
    let err = mppq_api::load_quantizer(&path, QuantizeSetting::default()).err().unwrap().to_string();
    assert!(err.contains(&format!("`{bn}` has variance -0.25 at channel 1")), "{err}");
}

/// The `quant.json` of a model whose loop body quantizes an enclosing weight (quantization gives
/// the body its own copy, `NAME_in_OP`) applies to the original model as to `model.float.onnx`,
/// with the same numbers (it was refused for an If: "`X` in the graph but `X_in_If_0` in the
/// JSON").
#[test]
fn quant_json_applies_to_the_original_model_of_a_loop_reading_an_enclosing_weight() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q");
    let model = testdata().join("tiny_loop.onnx");
    quantize_to_dir(
        &model,
        &testdata().join("tiny_loop_calib"),
        QuantizeSetting::default(),
        &out,
        &mut mppq_api::passes::NoProgress,
    )
    .unwrap();
    let json = std::fs::read_to_string(out.join("quant.json")).unwrap();
    assert!(json.contains("loop.shared.weight_in_"), "the body should quantize its own copy");
    let simulate = |path: &Path| {
        let mut m = mppq_api::onnx::load_model(path).unwrap();
        mppq_api::quantize::apply_quant_config(&mut m, &out.join("quant.json"), &Default::default()).unwrap();
        let feeds = mppq_api::model::run::read_feeds(&m, &testdata().join("tiny_loop_calib/batch_000.npz")).unwrap();
        let device = mppq_api::exec::Device::cpu();
        mppq_api::model::run::run_model_with(&m, feeds, &device, true).unwrap()
    };
    let (original, fused) = (simulate(&model), simulate(&out.join("model.float.onnx")));
    assert_eq!(original.len(), fused.len());
    for ((name, a), (_, b)) in original.iter().zip(&fused) {
        assert_eq!(a.to_f32_vec().unwrap(), b.to_f32_vec().unwrap(), "{name}");
    }
}

/// A `quant.json` applied to weights other than those it was made for (passes such as
/// equalization or training change them; the file describes `model.float.onnx`) is refused:
/// it simulated the original weights (ResNet-18 after training: 8.1 dB against the export's
/// 12.7 dB in ONNX Runtime).
#[test]
fn quant_json_for_other_weights_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q");
    quantize(&testdata().join("tiny_cnn.onnx"), QuantizeSetting::default(), &out).unwrap();
    let mut model = mppq_api::onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    mppq_api::quantize::apply_quant_config(&mut model.clone(), &out.join("quant.json"), &Default::default()).unwrap();
    let g = &mut model.graph;
    let (id, value) = g.variables().find_map(|(id, v)| (v.name == "fc.weight").then(|| (id, v.value.clone()))).unwrap();
    let mut values = value.unwrap().to_f32_vec().unwrap();
    values[0] += 0.5;
    let shape = g.variable(id).unwrap().value.as_ref().unwrap().shape().to_vec();
    g.variable_mut(id).unwrap().value = Some(mppq_api::ir::TensorData::from_vec(shape, &values).unwrap());
    let err = mppq_api::quantize::apply_quant_config(&mut model, &out.join("quant.json"), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("made for other weights") && err.contains("model.float.onnx"), "{err}");
}
