//! Built-in platforms beyond the default: each configures what its target defines. (That its
//! QDQ export runs in ONNX Runtime with the simulated numbers is `cargo xtask qdq-check
//! --setting` with the platform; docs/platforms.md.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mppq_api::QuantizeSetting;
use mppq_api::ir::quant::{ObserverKind, QuantizationState};
use std::path::Path;

fn testdata() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `testdata/tiny_cnn.onnx` quantized for `platform` on its calibration batches.
fn quantized_tiny_cnn(platform: &str) -> mppq_api::ModelQuantizer {
    let setting = QuantizeSetting { platform: platform.into(), ..Default::default() };
    mppq_api::quantize_onnx_model(&testdata().join("tiny_cnn.onnx"), &testdata().join("tiny_cnn_calib"), setting)
        .unwrap()
        .quantizer
}

/// ACADEMIC_INT8 as PPQ's platform tutorial defines it: only the inputs of Conv/Gemm/ConvTranspose,
/// uint8 asymmetric percentile data, int8 symmetric per-tensor weights, 30-bit biases, FP32 outputs.
#[test]
fn academic_int8_quantizes_only_computing_inputs() {
    let q = quantized_tiny_cnn("academic-int8");
    let mut convs = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        assert!(["Conv", "Gemm", "ConvTranspose"].contains(&op.op_type.as_str()), "{} {}", op.op_type, op.name);
        convs += usize::from(op.op_type == "Conv");
        assert!(qc.output_configs.iter().all(Option::is_none), "{}: outputs stay FP32", op.name);
        let [x, w, rest @ ..] = qc.input_configs.as_slice() else { panic!("{}", op.name) };
        let (x, w) = (x.as_ref().unwrap(), w.as_ref().unwrap());
        assert_eq!(
            (x.quant_min, x.quant_max, x.observer, x.policy.is_symmetric()),
            (0, 255, ObserverKind::Percentile, false)
        );
        assert_eq!((w.quant_min, w.quant_max, w.scale.len(), w.policy.is_symmetric()), (-128, 127, 1, true));
        if let [Some(b)] = rest {
            assert_eq!((b.num_of_bits, b.quant_min, b.quant_max), (30, -(1 << 29), (1 << 29) - 1));
            assert_ne!(b.state, QuantizationState::PassiveInit, "{}: the bias scale is derived", op.name);
            assert!((b.scale[0] - x.scale[0] * w.scale[0]).abs() <= b.scale[0] * 1e-6);
        }
    }
    assert_eq!(convs, 3);
    let dir = tempfile::tempdir().unwrap();
    for artifact in q.export_to(dir.path()).unwrap() {
        if artifact.path.extension().is_some_and(|e| e == "onnx") {
            mppq_api::onnx::load_model(&artifact.path).unwrap();
        }
    }
}

/// `pow2-int8`: every scale a power of two (biases too, as products of two), symmetric int8 per
/// tensor, the largest calibrated value never clipped (the scale rounds up).
#[test]
fn pow2_int8_scales_are_powers_of_two() {
    let q = quantized_tiny_cnn("pow2-int8");
    let mut checked = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        for c in qc.input_configs.iter().chain(&qc.output_configs).flatten() {
            if !c.state.is_active() {
                continue;
            }
            for s in &c.scale {
                assert_eq!(s.log2().fract(), 0.0, "{} ({}): scale {s}", op.name, op.op_type);
            }
            assert!(c.offset.iter().all(|o| *o == 0.0) && c.scale.len() == 1, "{}", op.name);
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

/// `openvino-int8`: the default scheme with narrow-range [−127, 127] weights.
#[test]
fn openvino_int8_weights_are_narrow_range() {
    let q = quantized_tiny_cnn("openvino-int8");
    let mut weights = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        if let Some(Some(w)) = qc.input_configs.get(1).filter(|_| op.op_type == "Conv") {
            assert_eq!((w.quant_min, w.quant_max, w.scale.len() > 1), (-127, 127, true), "{}", op.name);
            weights += 1;
        }
        if let Some(Some(x)) = qc.input_configs.first() {
            assert_eq!((x.quant_min, x.quant_max), (0, 255), "{}", op.name);
        }
    }
    assert_eq!(weights, 3);
}

/// `testdata/NAME.onnx` quantized for `platform` on its calibration batches.
fn quantized(model: &str, platform: &str) -> mppq_api::ModelQuantizer {
    let setting = QuantizeSetting { platform: platform.into(), ..Default::default() };
    mppq_api::quantize_onnx_model(
        &testdata().join(format!("{model}.onnx")),
        &testdata().join(format!("{model}_calib")),
        setting,
    )
    .unwrap()
    .quantizer
}

/// `trt-int8`: TensorRT's explicit-quantization placement. Only the inputs of Conv/Gemm/MatMul
/// and the skip input of a residual Add are quantized, symmetric int8 with zero point 0, weights
/// per output channel; no output and no bias is; the QDQ export has Q/DQ in front of those
/// operations only.
#[test]
fn trt_int8_places_qdq_where_tensorrt_wants_it() {
    for model in ["tiny_mobilenet", "tiny_transformer", "tiny_cnn"] {
        let q = quantized(model, "trt-int8");
        let g = &q.model.graph;
        let (mut weighted, mut residual) = (0, 0);
        for (_, op) in g.operations() {
            let Some(qc) = &op.quant_config else { continue };
            assert!(qc.output_configs.iter().all(Option::is_none), "{model}: {}: outputs stay float", op.name);
            let active: Vec<_> = qc.input_configs.iter().flatten().filter(|c| c.state.is_active()).collect();
            for c in &active {
                assert_eq!((c.num_of_bits, c.quant_min, c.quant_max), (8, -128, 127), "{model}: {}", op.name);
                assert!(c.offset.iter().all(|z| *z == 0.0), "{model}: {}: zero points are 0", op.name);
            }
            match op.op_type.as_str() {
                "Add" => {
                    assert!(active.len() <= 1, "{model}: {}: only the skip input", op.name);
                    residual += active.len();
                }
                "Conv" | "ConvTranspose" | "Gemm" | "MatMul" => {
                    weighted += 1;
                    if op.op_type == "Conv" {
                        let w = qc.input_configs[1].as_ref().unwrap();
                        assert!(
                            w.scale.len() > 1
                                || g.variable(op.inputs()[1].unwrap()).unwrap().value.as_ref().unwrap().shape()[0] == 1
                        );
                        assert!(
                            qc.input_configs.get(2).is_none_or(Option::is_none),
                            "{model}: {}: bias float",
                            op.name
                        );
                    }
                }
                other => panic!("{model}: {}: {other} should not be quantized", op.name),
            }
        }
        assert!(weighted > 0, "{model}");
        if model == "tiny_mobilenet" {
            assert!(residual > 0, "tiny_mobilenet has residual Adds");
        }
        // In the export, every DequantizeLinear of an activation feeds a weighted op or an Add.
        let dir = tempfile::tempdir().unwrap();
        q.export_to(dir.path()).unwrap();
        let qdq = mppq_api::onnx::load_model(dir.path().join("model.qdq.onnx")).unwrap();
        let g = &qdq.graph;
        let mut readers = std::collections::BTreeSet::new();
        for (_, op) in g.operations().filter(|(_, op)| op.op_type == "DequantizeLinear") {
            for reader in g.consumers(op.outputs()[0].unwrap()) {
                readers.insert(g.operation(*reader).unwrap().op_type.clone());
            }
        }
        assert!(
            readers.iter().all(|t| ["Conv", "ConvTranspose", "Gemm", "MatMul", "Add"].contains(&t.as_str())),
            "{model}: {readers:?}"
        );
        assert!(dir.path().join("dynamic_range.json").exists());
    }
}

/// `trt-lowbit`: the same placement with 4-bit weights by default, written as INT4 Q/DQ.
#[test]
fn trt_lowbit_writes_int4_weights() {
    let q = quantized_tiny_cnn("trt-lowbit");
    let mut weights = 0;
    for (_, op) in q.model.graph.operations().filter(|(_, op)| op.op_type == "Conv") {
        let w = op.quant_config.as_ref().unwrap().input_configs[1].as_ref().unwrap();
        assert_eq!((w.num_of_bits, w.quant_min, w.quant_max), (4, -8, 7), "{}", op.name);
        weights += 1;
    }
    assert_eq!(weights, 3);
    let dir = tempfile::tempdir().unwrap();
    q.export_to(dir.path()).unwrap();
    let qdq = mppq_api::onnx::load_model(dir.path().join("model.qdq.onnx")).unwrap();
    assert!(qdq.opset("").unwrap() >= 21, "INT4 Q/DQ needs opset 21");
}

/// `ncnn-int8` and its table: the values `ncnn2int8` reads are the reciprocals of our symmetric
/// scales, per output channel for weights (one per group for a grouped convolution), keyed by
/// layer name; weight lines first, as `ncnn2table` writes them.
#[test]
fn ncnn_table_holds_the_reciprocal_scales_of_each_layer() {
    use mppq_api::export::formats::ncnn_table;
    for model in ["tiny_cnn", "tiny_mobilenet"] {
        let q = quantized(model, "ncnn-int8");
        let dir = tempfile::tempdir().unwrap();
        q.export_to(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(ncnn_table::FILE)).unwrap();
        let ncnn_table::Table { weights, inputs } = ncnn_table::read(&text).unwrap();
        let first_input = text.lines().position(|l| !l.split_whitespace().next().unwrap().ends_with("_param_0"));
        assert_eq!(first_input, Some(weights.len()), "{model}: weight lines first");
        assert_eq!(weights.len(), inputs.len());
        let g = &q.model.graph;
        let mut layers = 0;
        for (_, op) in g.operations() {
            let Some(qc) = &op.quant_config else { continue };
            assert!(["Conv", "Gemm"].contains(&op.op_type.as_str()), "{model}: {}", op.name);
            assert!(qc.output_configs.iter().all(Option::is_none));
            let (Some(x), Some(w)) = (qc.input_configs[0].as_ref(), qc.input_configs[1].as_ref()) else { continue };
            assert_eq!((x.quant_min, x.quant_max, w.quant_min, w.quant_max), (-127, 127, -127, 127));
            let (_, input) = inputs.iter().find(|(n, _)| *n == op.name).unwrap();
            assert!((input * x.scale[0] - 1.0).abs() < 1e-6, "{model}: {}", op.name);
            let (_, ws) = weights.iter().find(|(n, _)| *n == op.name).unwrap();
            let out_channels = g.variable(op.inputs()[1].unwrap()).unwrap().value.as_ref().unwrap().shape()[0];
            let group = op.attr_int("group", 1).unwrap() as usize;
            assert_eq!(
                ws.len(),
                if group > 1 {
                    group
                } else if op.op_type == "Gemm" {
                    ws.len()
                } else {
                    out_channels
                }
            );
            for (i, s) in ws.iter().enumerate() {
                let ours = if w.scale.len() == 1 { w.scale[0] } else { w.scale[i] };
                assert!((s * ours - 1.0).abs() < 1e-6, "{model}: {} channel {i}", op.name);
            }
            layers += 1;
        }
        assert_eq!(layers, weights.len(), "{model}");
    }
}

/// `qnn-int8` / `snpe-int8`: uint8 activations; weights int8 symmetric per channel (QNN) or
/// uint8 asymmetric per tensor (SNPE); the encodings file is written.
#[test]
fn qualcomm_platforms_configure_their_weights_and_write_encodings() {
    for (platform, signed, per_channel) in [("qnn-int8", true, true), ("snpe-int8", false, false)] {
        let q = quantized_tiny_cnn(platform);
        for (_, op) in q.model.graph.operations().filter(|(_, op)| op.op_type == "Conv") {
            let qc = op.quant_config.as_ref().unwrap();
            let (x, w) = (qc.input_configs[0].as_ref().unwrap(), qc.input_configs[1].as_ref().unwrap());
            assert_eq!((x.quant_min, x.quant_max), (0, 255), "{platform}: {}", op.name);
            assert_eq!((w.quant_min < 0, w.scale.len() > 1), (signed, per_channel), "{platform}: {}", op.name);
        }
        let dir = tempfile::tempdir().unwrap();
        q.export_to(dir.path()).unwrap();
        assert!(dir.path().join("model.encodings").exists(), "{platform}");
    }
}

/// `ppl-cuda-int8`: PPQ's PPL JSON beside the float model; per-tensor values are numbers, the
/// covered range is `scale · (q − zero_point)` at both ends, biases are not listed.
#[test]
fn ppl_cuda_json_lists_every_8_bit_tensor() {
    let q = quantized_tiny_cnn("ppl-cuda-int8");
    let dir = tempfile::tempdir().unwrap();
    q.export_to(dir.path()).unwrap();
    assert!(dir.path().join("model.float.onnx").exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("ppl_cuda.json")).unwrap()).unwrap();
    let info = json["quant_info"].as_object().unwrap();
    assert!(info.len() >= 8, "{}", info.len());
    for (name, t) in info {
        assert_eq!(t["bit_width"], 8, "{name}");
        assert_eq!(t["sym"], true, "{name}");
        if t["per_channel"] == false {
            let (s, min, max) =
                (t["scale"].as_f64().unwrap(), t["tensor_min"].as_f64().unwrap(), t["tensor_max"].as_f64().unwrap());
            assert!((min + 128.0 * s).abs() < 1e-9 && (max - 127.0 * s).abs() < 1e-9, "{name}");
        } else {
            assert!(t["scale"].as_array().unwrap().len() > 1, "{name}");
        }
    }
    assert!(json["op_info"].as_object().unwrap().values().all(|v| v["data_type"] == "INT8"));
}

/// `mppq dispatch` shows what `mppq quantize` decides: the platform's quantizer and dispatcher,
/// after the same fusions (BatchNormalization folded into its Conv), with `--ignore` checked.
#[test]
fn dispatch_preview_is_the_dispatch_quantize_decides() {
    for (model, platform) in [("tiny_mobilenet", "default"), ("tiny_cnn", "trt-int8"), ("detect_branch", "ncnn-int8")] {
        let setting = QuantizeSetting { platform: platform.into(), ..Default::default() };
        let mut q = mppq_api::load_quantizer(&testdata().join(format!("{model}.onnx")), setting).unwrap();
        let preview = q.preview_dispatch().unwrap().to_string();
        let calib = testdata().join(format!("{model}_calib"));
        let calib = mppq_api::quantize::open_calibration(&q, &calib, &mut mppq_api::passes::NoProgress).unwrap();
        q.quantize(&calib, &mut mppq_api::passes::NoProgress).unwrap();
        assert_eq!(preview, q.dispatch.unwrap().to_string(), "{model} on {platform}");
        assert!(!preview.contains("BatchNormalization"), "{preview}");
    }
    let setting = QuantizeSetting { ignore: vec!["conv9".into()], ..Default::default() };
    let err = mppq_api::load_quantizer(&testdata().join("tiny_cnn.onnx"), setting).err().unwrap().to_string();
    assert!(err.contains("ignore `conv9` matches no operation"), "{err}");
}

/// `weight-only`: block-wise INT4 MatMul weights, activations float. Both export forms run in our
/// executor (its `MatMulNBits` kernel, opset 21's blocked `DequantizeLinear`) with the simulated
/// numbers; `MatMulNBits` holds the simulation's codes packed low nibble first. (ORT on the
/// same exports: `qdq-check --setting xtask/settings/weight-only-*.toml`, CI.)
#[test]
fn weight_only_exports_run_as_simulated() {
    use mppq_api::exec::{Device, Tensor, Value};
    for (symmetric, form) in [(false, "matmul_nbits"), (true, "matmul_nbits"), (true, "dequantize_linear")] {
        let mut setting = QuantizeSetting { platform: "weight-only".into(), ..Default::default() };
        setting.quantizer.block_size = Some(32);
        setting.quantizer.symmetric = Some(symmetric);
        setting.exporters = Some(vec!["qdq".into()]);
        setting.export.insert("qdq".into(), serde_json::json!({ "blocked_weights": form }));
        let q = mppq_api::quantize_onnx_model(
            &testdata().join("tiny_transformer.onnx"),
            &testdata().join("tiny_transformer_calib"),
            setting,
        )
        .unwrap()
        .quantizer;
        let g = &q.model.graph;
        let blocked: Vec<_> = g
            .operations()
            .filter_map(|(_, op)| op.quant_config.as_ref()?.input_configs.get(1)?.clone())
            .filter(|c| c.block.is_some())
            .collect();
        assert_eq!(blocked.len(), 12, "every MatMul weight of the two blocks");
        assert!(blocked.iter().all(|c| c.state == QuantizationState::Activated && c.num_of_bits == 4));
        let dir = tempfile::tempdir().unwrap();
        q.export_to(dir.path()).unwrap();
        let export = mppq_api::onnx::load_model(dir.path().join("model.qdq.onnx")).unwrap();
        let nbits = export.graph.operations().filter(|(_, op)| op.op_type == "MatMulNBits").count();
        let dq = export.graph.operations().filter(|(_, op)| op.op_type == "DequantizeLinear").count();
        if form == "matmul_nbits" {
            assert_eq!((nbits, dq, export.opset("com.microsoft")), (12, 0, Some(1)));
            let zero_points =
                export.graph.operations().any(|(_, op)| op.op_type == "MatMulNBits" && op.inputs().len() > 3);
            assert_eq!(zero_points, !symmetric, "zero points only when asymmetric");
        } else {
            assert_eq!((nbits, dq), (0, 12));
            assert!(export.opset("").unwrap() >= 21, "blocked DequantizeLinear needs opset 21");
        }
        let device = Device::cpu();
        let batch = mppq_api::data::npy::read_npz(&testdata().join("tiny_transformer_calib/batch_000.npz")).unwrap();
        let feeds: Vec<(String, Value)> =
            batch.into_iter().map(|(n, d)| (n, Value::Tensor(Tensor::from_data(&d, &device).unwrap()))).collect();
        assert_export_is_simulation(&q, &export, feeds, 1e-4, &format!("{form} symmetric={symmetric}"));
    }
}

/// `weight-only` on input-channel runs that are not a multiple of the block (K = 40 with blocks
/// of 32; a Gemm with K = 8 < 32, `transB`, `beta = 0` and no C, as tf2onnx writes it): every
/// weight becomes a `MatMulNBits` whose numbers, run by our executor, are the simulation's.
/// (ONNX Runtime on the same file: `docs/weight-only.md`, equal to float rounding.)
#[test]
fn weight_only_blocks_cut_short_and_plain_gemms_become_matmul_nbits() {
    use mppq_api::ir::{Attribute, Graph, Model, Operation, TensorData, Variable};
    let dir = tempfile::tempdir().unwrap();
    let values = |n: usize, seed: f32| (0..n).map(|i| (i as f32 * 0.37 + seed).sin() * 1.7).collect::<Vec<f32>>();
    let mut g = Graph::new("ragged");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.add_graph_input(x).unwrap();
    let w = g.add_initializer("w", TensorData::from_vec(vec![40, 8], &values(320, 0.1)).unwrap()).unwrap();
    let w2 = g.add_initializer("w2", TensorData::from_vec(vec![40, 8], &values(320, 0.7)).unwrap()).unwrap();
    let [h, r, y] = ["h", "r", "y"].map(|n| g.add_variable(Variable::new(n)).unwrap());
    g.add_operation(Operation::new("MatMul", "mm").with_opset(17), &[Some(x), Some(w)], &[Some(h)]).unwrap();
    g.add_operation(Operation::new("Relu", "relu").with_opset(17), &[Some(h)], &[Some(r)]).unwrap();
    let gemm = Operation::new("Gemm", "gemm")
        .with_opset(17)
        .with_attr("transB", Attribute::Int(1))
        .with_attr("beta", Attribute::Float(0.0));
    g.add_operation(gemm, &[Some(r), Some(w2)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let model = dir.path().join("ragged.onnx");
    mppq_onnx::save_model(&Model::new(g, 17), &model, &Default::default()).unwrap();
    let calib = dir.path().join("calib");
    std::fs::create_dir(&calib).unwrap();
    for b in 0..2 {
        let batch = TensorData::from_vec(vec![3, 40], &values(120, b as f32)).unwrap();
        mppq_api::data::npy::write_npy(&calib.join(format!("b{b}.npy")), &batch).unwrap();
    }
    let mut setting = QuantizeSetting { platform: "weight-only".into(), ..Default::default() };
    setting.quantizer.block_size = Some(32);
    setting.exporters = Some(vec!["qdq".into()]);
    let q = mppq_api::quantize_onnx_model(&model, &calib, setting).unwrap().quantizer;
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    q.export_to(&out).unwrap();
    let export = mppq_api::onnx::load_model(out.join("model.qdq.onnx")).unwrap();
    let types: Vec<&str> = export.graph.operations().map(|(_, op)| op.op_type.as_str()).collect();
    assert_eq!(types.iter().filter(|t| **t == "MatMulNBits").count(), 2, "{types:?}");
    let device = mppq_api::exec::Device::cpu();
    let x = mppq_api::exec::Tensor::from_f32(&[3, 40], values(120, 5.0), &device);
    assert_export_is_simulation(&q, &export, vec![("x".to_string(), mppq_api::exec::Value::Tensor(x))], 1e-5, "ragged");
}

/// `weight-only` on a float16 model: the block scales are float16 values (what `MatMulNBits`
/// binds to A's type; a float32 scale made ONNX Runtime refuse the file), and the export run by
/// our executor is the simulation. (ORT 1.31 on tiny_transformer converted to float16: 31.40 dB,
/// the simulation's figure; `docs/weight-only.md`.)
#[test]
fn weight_only_float16_models_keep_their_scales_in_float16() {
    use mppq_api::ir::{DataType, Graph, Model, Operation, TensorData, Variable};
    let dir = tempfile::tempdir().unwrap();
    let values = |n: usize, seed: f32| (0..n).map(|i| (i as f32 * 0.37 + seed).sin() * 1.7).collect::<Vec<f32>>();
    let mut g = Graph::new("half");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.add_graph_input(x).unwrap();
    let w = TensorData::from_f32_as(DataType::Float16, vec![64, 8], &values(512, 0.3)).unwrap();
    let w = g.add_initializer("w", w).unwrap();
    let y = g.add_variable(Variable::new("y")).unwrap();
    g.add_operation(Operation::new("MatMul", "mm").with_opset(17), &[Some(x), Some(w)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let model = dir.path().join("half.onnx");
    mppq_onnx::save_model(&Model::new(g, 17), &model, &Default::default()).unwrap();
    let calib = dir.path().join("calib");
    std::fs::create_dir(&calib).unwrap();
    let batch = |seed: f32| TensorData::from_f32_as(DataType::Float16, vec![2, 64], &values(128, seed)).unwrap();
    for b in 0..2 {
        mppq_api::data::npy::write_npy(&calib.join(format!("b{b}.npy")), &batch(b as f32)).unwrap();
    }
    let mut setting = QuantizeSetting { platform: "weight-only".into(), ..Default::default() };
    setting.quantizer.block_size = Some(32);
    setting.exporters = Some(vec!["qdq".into()]);
    let q = mppq_api::quantize_onnx_model(&model, &calib, setting).unwrap().quantizer;
    let c = q.model.graph.operations().find_map(|(_, op)| op.quant_config.as_ref()?.input_configs[1].clone()).unwrap();
    for v in c.scale.iter().chain(&c.offset) {
        let as_half = TensorData::from_f32_as(DataType::Float16, vec![1], &[*v]).unwrap().to_f32_vec().unwrap();
        assert_eq!(as_half[0], *v, "block parameters are float16 values");
    }
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    q.export_to(&out).unwrap();
    let export = mppq_api::onnx::load_model(out.join("model.qdq.onnx")).unwrap();
    let (_, nbits) = export.graph.operations().find(|(_, op)| op.op_type == "MatMulNBits").unwrap();
    for slot in [2, 3] {
        let var = export.graph.variable(nbits.inputs()[slot].unwrap()).unwrap();
        assert_eq!(var.value.as_ref().unwrap().dtype(), DataType::Float16, "input {slot} of MatMulNBits");
    }
    let device = mppq_api::exec::Device::cpu();
    let x = mppq_api::exec::Tensor::from_data(&batch(7.0), &device).unwrap();
    // Float16 arithmetic: the simulated MatMul runs in float16, the MatMulNBits kernel (as ONNX
    // Runtime's on x86) in float32 on the same codes; they differ by float16 rounding (K = 64).
    assert_export_is_simulation(
        &q,
        &export,
        vec![("x".to_string(), mppq_api::exec::Value::Tensor(x))],
        1e-2,
        "float16",
    );
}

/// Runs `feeds` through the simulation of `q`'s model and through `export` in our executor, and
/// asserts the first outputs agree within `tolerance` of the simulated peak.
fn assert_export_is_simulation(
    q: &mppq_api::ModelQuantizer,
    export: &mppq_api::ir::Model,
    feeds: Vec<(String, mppq_api::exec::Value)>,
    tolerance: f32,
    what: &str,
) {
    use mppq_api::exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation};
    let device = Device::cpu();
    let opsets = |m: &mppq_api::ir::Model| {
        let imports = m.opset_imports.clone();
        move |d: &str| mppq_api::ir::graph::lookup_opset(&imports, d).unwrap_or(0)
    };
    let sim_exec = Executor::new(&q.model.graph, &OpRegistry::builtin(), &device, &opsets(&q.model)).unwrap();
    let ours = Executor::new(&export.graph, &OpRegistry::builtin(), &device, &opsets(export)).unwrap();
    let mut sim = QuantSimulation::new(&q.model.graph, BurnFakeQuant);
    let a = sim_exec.run(feeds.clone(), &mut [&mut sim]).unwrap()[0].1.as_tensor().unwrap().to_f32_vec();
    let b = ours.run(feeds, &mut []).unwrap()[0].1.as_tensor().unwrap().to_f32_vec();
    let peak = a.iter().fold(0f32, |m, v| m.max(v.abs()));
    let worst = a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(worst <= tolerance * peak, "{what}: export differs from the simulation by {worst} (peak {peak})");
}

/// Block-wise options are refused up front where they mean nothing, each with the platform that
/// takes them: `block_size` on `default`, `hqq` for activations, `bits` on `weight-only`.
#[test]
fn block_wise_options_are_refused_where_they_mean_nothing() {
    let refusal = |platform: &str, edit: &dyn Fn(&mut QuantizeSetting)| {
        let mut setting = QuantizeSetting { platform: platform.into(), ..Default::default() };
        edit(&mut setting);
        mppq_api::load_quantizer(&testdata().join("tiny_transformer.onnx"), setting).err().unwrap().to_string()
    };
    let err = refusal("default", &|s| s.quantizer.block_size = Some(32));
    assert!(err.contains("`block_size`") && err.contains("`weight-only`"), "{err}");
    let err = refusal("default", &|s| s.quantizer.observer = Some(ObserverKind::Hqq));
    assert!(err.contains("`hqq`") && err.contains("`weight-only`"), "{err}");
    let err = refusal("weight-only", &|s| s.quantizer.bits = Some(8));
    assert!(err.contains("`bits`") && err.contains("activations stay float"), "{err}");
    let err = refusal("weight-only", &|s| s.quantizer.observer = Some(ObserverKind::Kl));
    assert!(err.contains("observer = kl"), "{err}");
}
