//! The Caffe frontend's structure: operations and shapes of the converted nets, in-place blobs
//! as SSA values, Caffe's pooling sizes, legacy V1 layers and phase rules, and typed errors on
//! broken input. The numbers are checked against OpenCV in mppq-api's `tests/caffe.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_ir::{Attribute, Dim, Model, ValueType};
use mppq_onnx::caffe::schema::{BlobProto, BlobShape, LayerParameter, NetParameter};
use mppq_onnx::caffe::{CaffeError, load_caffe_from_bytes};
use mppq_onnx::{OnnxError, load_caffe};
use prost::Message;
use std::path::PathBuf;

fn testdata(name: &str) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe");
    (dir.join(format!("{name}.prototxt")), dir.join(format!("{name}.caffemodel")))
}

fn load(name: &str) -> Model {
    let (p, m) = testdata(name);
    load_caffe(p, m).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn op_types(model: &Model) -> Vec<String> {
    model.graph.operations().map(|(_, op)| op.op_type.clone()).collect()
}

fn output_shapes(model: &Model) -> Vec<(String, Vec<i64>)> {
    let g = &model.graph;
    g.outputs()
        .iter()
        .map(|&v| {
            let var = g.variable(v).unwrap();
            let Some(ValueType::Tensor(t)) = &var.ty else { panic!("output {} has no tensor type", var.name) };
            let dims = t.shape.as_ref().unwrap().iter().map(|d| if let Dim::Known(k) = d { *k } else { -1 }).collect();
            (var.name.clone(), dims)
        })
        .collect()
}

fn caffe_error(result: Result<Model, OnnxError>) -> CaffeError {
    match result {
        Err(OnnxError::Caffe(e)) => e,
        Err(other) => panic!("not a Caffe error: {other}"),
        Ok(_) => panic!("loaded"),
    }
}

fn blob(dims: &[i64], values: Vec<f32>) -> BlobProto {
    BlobProto { shape: Some(BlobShape { dim: dims.to_vec() }), data: values, ..Default::default() }
}

fn weights(layers: Vec<(&str, Vec<BlobProto>)>) -> Vec<u8> {
    let layer = layers
        .into_iter()
        .map(|(name, blobs)| LayerParameter { name: Some(name.into()), blobs, ..Default::default() })
        .collect();
    NetParameter { layer, ..Default::default() }.encode_to_vec()
}

const CONV_NET: &str = r#"
name: "t"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  param { lr_mult: 1 } convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
"#;

fn conv_weights(weight_len: usize, with_bias: bool) -> Vec<u8> {
    let mut blobs = vec![blob(&[3, 2, 3, 3], vec![0.5; weight_len])];
    if with_bias {
        blobs.push(blob(&[3], vec![0.0; 3]));
    }
    weights(vec![("conv", blobs)])
}

#[test]
fn conv_net_becomes_onnx_operations_with_ssa_names() {
    let model = load("conv_inplace");
    assert_eq!(op_types(&model), ["Conv", "Relu", "Conv", "LeakyRelu", "Flatten", "Gemm", "Softmax"]);
    assert_eq!(model.opset(""), Some(13));
    let g = &model.graph;
    // conv1 is written twice (Convolution, then ReLU in place): the first write is renamed,
    // the last keeps the blob's name.
    let relu = g.op_id("relu1").unwrap();
    let relu = g.operation(relu).unwrap();
    assert_eq!(g.var_name(relu.inputs()[0].unwrap()), "conv1@conv1");
    assert_eq!(g.var_name(relu.outputs()[0].unwrap()), "conv1");
    assert_eq!(output_shapes(&model), [("prob".to_string(), vec![2, 5])]);
    let inputs: Vec<_> = g.inputs().iter().map(|&v| g.var_name(v).to_string()).collect();
    assert_eq!(inputs, ["data"]);
    g.validate(&Default::default()).unwrap();
}

#[test]
fn pooling_follows_caffe_rounding_and_divisor() {
    let model = load("pooling");
    let shapes = output_shapes(&model);
    let shape = |n: &str| shapes.iter().find(|(name, _)| name == n).unwrap().1.clone();
    // 8 x 9, kernel 3, stride 2: ceil(5/2)+1 = 4 and ceil(6/2)+1 = 4 (floor would give 3 x 4).
    assert_eq!(shape("max_ceil"), [1, 3, 4, 4]);
    // kernel 2, stride 2, pad 1: ceil(8/2)+1 = 5 rows, and 5 + 1 columns less the window
    // that would start in the padding: 5.
    assert_eq!(shape("ave_clip"), [1, 3, 5, 5]);
    assert_eq!(shape("gap"), [1, 3, 1, 1]);
    // AVE with padding: explicit Pad, then a pool that counts only the padded input.
    let g = &model.graph;
    let pool = g.operation(g.op_id("ave_pad").unwrap()).unwrap();
    assert_eq!(pool.op_type, "AveragePool");
    assert_eq!(pool.attr("count_include_pad"), Some(&Attribute::Int(0)));
    assert_eq!(g.operation(g.op_id("ave_pad/pad").unwrap()).unwrap().op_type, "Pad");
    let max = g.operation(g.op_id("max_ceil").unwrap()).unwrap();
    assert_eq!(max.attr("pads"), Some(&Attribute::Ints(vec![0, 0, 1, 0])));
}

#[test]
fn every_test_net_converts() {
    for name in [
        "conv_inplace",
        "pooling",
        "batchnorm_scale",
        "eltwise_concat",
        "deconv",
        "activations",
        "shapes",
        "lrn",
        "legacy_input",
    ] {
        let model = load(name);
        model.graph.validate(&Default::default()).unwrap();
        assert!(!model.graph.outputs().is_empty(), "{name}");
    }
    let types = op_types(&load("shapes"));
    for t in ["Split", "Flatten", "Reshape", "Gemm", "Softmax", "Mul", "Add"] {
        assert!(types.iter().any(|x| x == t), "shapes lacks {t}: {types:?}");
    }
    // Split and Dropout make no operation; a Dropout top that is an output gets an Identity.
    let types = op_types(&load("activations"));
    assert!(!types.iter().any(|t| t == "Dropout"));
    assert_eq!(op_types(&load("batchnorm_scale")).iter().filter(|t| *t == "BatchNormalization").count(), 2);
}

#[test]
fn inner_product_transpose_reads_the_weight_as_k_by_n() {
    let text = r#"
input: "x" input_shape { dim: 2 dim: 4 }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
  inner_product_param { num_output: 3 transpose: true bias_term: false } }
"#;
    let model =
        load_caffe_from_bytes(text, &weights(vec![("ip", vec![blob(&[4, 3], vec![1.0; 12])])]), "t", "w").unwrap();
    let g = &model.graph;
    let gemm = g.operation(g.op_id("ip").unwrap()).unwrap();
    assert_eq!(gemm.op_type, "Gemm");
    assert_eq!(gemm.attr("transB"), Some(&Attribute::Int(0)));
    assert_eq!(output_shapes(&model), [("y".to_string(), vec![2, 3])]);
}

#[test]
fn legacy_v1_layers_and_phase_rules() {
    let text = r#"
input: "data" input_shape { dim: 1 dim: 2 dim: 4 dim: 4 }
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 3 } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "conv" top: "loss" include { phase: TRAIN } }
"#;
    let model = load_caffe_from_bytes(text, &conv_weights(54, true), "t", "w").unwrap();
    assert_eq!(op_types(&model), ["Conv", "Relu"]);
    assert_eq!(output_shapes(&model), [("conv".to_string(), vec![1, 3, 2, 2])]);
}

#[test]
fn unknown_layer_type_names_layer_and_supported_types() {
    let text = format!("{CONV_NET}layer {{ name: \"boxes\" type: \"PriorBox\" bottom: \"conv\" top: \"boxes\" }}\n");
    let e = caffe_error(load_caffe_from_bytes(&text, &conv_weights(54, true), "net.prototxt", "w"));
    assert!(
        matches!(&e, CaffeError::UnsupportedLayer { layer, layer_type, .. } if layer == "boxes" && layer_type == "PriorBox")
    );
    let message = e.to_string();
    assert!(message.contains("net.prototxt") && message.contains("Convolution"), "{message}");
}

#[test]
fn weights_problems_are_typed_errors() {
    let missing = caffe_error(load_caffe_from_bytes(CONV_NET, &conv_weights(54, false), "n", "w.caffemodel"));
    assert!(matches!(&missing, CaffeError::Weights { layer, .. } if layer == "conv"), "{missing}");
    assert!(missing.to_string().contains("w.caffemodel"));
    let wrong_size = caffe_error(load_caffe_from_bytes(CONV_NET, &conv_weights(50, true), "n", "w"));
    assert!(wrong_size.to_string().contains("holds 50 values"), "{wrong_size}");
    let bytes = conv_weights(54, true);
    let truncated = caffe_error(load_caffe_from_bytes(CONV_NET, &bytes[..bytes.len() - 3], "n", "w"));
    assert!(matches!(truncated, CaffeError::Decode { .. }), "{truncated}");
}

/// Weights that contradict the prototxt are refused, as Caffe refuses them (they were accepted:
/// the same element count in another layout, extra blobs, a bias for `bias_term: false`).
#[test]
fn weights_that_contradict_the_prototxt_are_refused() {
    let transposed = weights(vec![("conv", vec![blob(&[2, 3, 3, 3], vec![0.5; 54]), blob(&[3], vec![0.0; 3])])]);
    let e = caffe_error(load_caffe_from_bytes(CONV_NET, &transposed, "n", "w")).to_string();
    assert!(e.contains("has shape [2, 3, 3, 3]") && e.contains("[3, 2, 3, 3]") && e.contains("conv"), "{e}");
    let extra = weights(vec![(
        "conv",
        vec![blob(&[3, 2, 3, 3], vec![0.5; 54]), blob(&[3], vec![0.0; 3]), blob(&[3], vec![0.0; 3])],
    )]);
    let e = caffe_error(load_caffe_from_bytes(CONV_NET, &extra, "n", "w")).to_string();
    assert!(e.contains("has 3 blob(s), the prototxt's layer uses 2"), "{e}");
    let no_bias = CONV_NET.replace("kernel_size: 3", "kernel_size: 3 bias_term: false");
    let e = caffe_error(load_caffe_from_bytes(&no_bias, &conv_weights(54, true), "n", "w")).to_string();
    assert!(e.contains("has 2 blob(s), the prototxt's layer uses 1") && e.contains("bias_term"), "{e}");
    // Blobs without any shape, and shapes with leading 1s, still load (legacy 4-D InnerProduct
    // weights are covered by every_test_net_converts).
    let shapeless = BlobProto { data: vec![0.5; 54], ..Default::default() };
    let ok = weights(vec![("conv", vec![shapeless, blob(&[1, 3], vec![0.0; 3])])]);
    assert!(load_caffe_from_bytes(CONV_NET, &ok, "n", "w").is_ok());
}

#[test]
fn text_errors_name_the_line() {
    let text = "name: \"t\"\nlayer {\n  name: \"a\"\n  permute_param { order: 0 }\n}\n";
    let e = caffe_error(load_caffe_from_bytes(text, &[], "ssd.prototxt", "w"));
    assert!(matches!(&e, CaffeError::Text { line: 4, .. }), "{e}");
    assert!(e.to_string().contains("permute_param"), "{e}");
    let e = caffe_error(load_caffe_from_bytes("layer { name: ", &[], "cut.prototxt", "w"));
    assert!(matches!(e, CaffeError::Text { .. }), "{e}");
}

#[test]
fn structural_problems_are_typed_errors() {
    let cases = [
        // A bottom nobody produced.
        "input: \"x\" input_shape { dim: 1 dim: 2 }\nlayer { name: \"r\" type: \"ReLU\" bottom: \"y\" top: \"r\" }",
        // Pooling whose kernel exceeds the padded input.
        "input: \"x\" input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\nlayer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"p\" pooling_param { kernel_size: 5 } }",
        // Reshape to a different element count.
        "input: \"x\" input_shape { dim: 2 dim: 8 }\nlayer { name: \"r\" type: \"Reshape\" bottom: \"x\" top: \"r\" reshape_param { shape { dim: 3 dim: 5 } } }",
        // Negative input size; input without shape.
        "input: \"x\" input_shape { dim: 1 dim: -2 }",
        "input: \"x\" input_dim: 1 input_dim: 2",
        "input: \"x\"",
        // Slice points out of order.
        "input: \"x\" input_shape { dim: 1 dim: 6 }\nlayer { name: \"s\" type: \"Slice\" bottom: \"x\" top: \"a\" top: \"b\" top: \"c\" slice_param { slice_point: 4 slice_point: 2 } }",
        // Convolution with zero stride.
        "input: \"x\" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }\nlayer { name: \"c\" type: \"Convolution\" bottom: \"x\" top: \"c\" convolution_param { num_output: 1 kernel_size: 1 stride: 0 } }",
    ];
    for text in cases {
        let e = caffe_error(load_caffe_from_bytes(text, &[], "n", "w"));
        let expected = if text.contains("layer") {
            matches!(e, CaffeError::Layer { .. })
        } else {
            matches!(e, CaffeError::Net { .. })
        };
        assert!(expected, "{text}: {e}");
    }
}

#[test]
fn no_panic_on_cut_or_corrupted_files() {
    let (p, m) = testdata("batchnorm_scale");
    let text = std::fs::read_to_string(p).unwrap();
    let bytes = std::fs::read(m).unwrap();
    for cut in (0..bytes.len()).step_by(7) {
        let _ = load_caffe_from_bytes(&text, &bytes[..cut], "n", "w");
    }
    for cut in (0..text.len()).step_by(5).filter(|&c| text.is_char_boundary(c)) {
        let _ = load_caffe_from_bytes(&text[..cut], &bytes, "n", "w");
    }
    let mut flipped = bytes.clone();
    for i in (0..flipped.len()).step_by(13) {
        flipped[i] ^= 0x5a;
        let _ = load_caffe_from_bytes(&text, &flipped, "n", "w");
    }
}
