//! The malformed-input corpus, generated from a valid model: every case must give a typed
//! error that names the file (and the node or field), never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_ir::{Graph, Model, Operation, TensorData};
use mppq_onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto};
use mppq_onnx::{OnnxError, load_model, load_model_from_bytes, model_to_bytes};
use prost::Message;
use std::path::PathBuf;

fn valid_model_bytes() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tiny_cnn.onnx");
    std::fs::read(path).expect("testdata/tiny_cnn.onnx is in the repository")
}

fn load(bytes: &[u8]) -> Result<Model, OnnxError> {
    load_model_from_bytes(bytes, None, "case.onnx")
}

#[test]
fn truncated_files_are_decode_errors() {
    let bytes = valid_model_bytes();
    for len in [0usize, 1, 7, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let err = load(&bytes[..len]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("case.onnx"), "{msg}");
        assert!(matches!(err, OnnxError::Decode { .. } | OnnxError::Invalid { .. }), "len {len}: {msg}");
    }
}

#[test]
fn random_bytes_are_rejected() {
    let mut state = 0x2545_f491_u32;
    for round in 0..50 {
        let bytes: Vec<u8> = (0..64 + round * 97)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        let err = load(&bytes).expect_err("random bytes must not load as a model");
        assert!(err.to_string().contains("case.onnx"), "{err}");
    }
}

#[test]
fn bit_flips_never_panic() {
    let bytes = valid_model_bytes();
    let mut errors = 0;
    // Flip one bit at positions spread over the whole file (structure and weights alike).
    for pos in (0..bytes.len()).step_by(97) {
        for bit in [0u8, 3, 7] {
            let mut flipped = bytes.clone();
            flipped[pos] ^= 1 << bit;
            if let Err(e) = load(&flipped) {
                assert!(e.to_string().contains("case.onnx"), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "some flips must break the model");
    // Flipping the wire type of the first field (ir_version, varint → 64-bit) is always an error.
    let mut flipped = bytes.clone();
    flipped[0] ^= 1;
    assert!(matches!(load(&flipped), Err(OnnxError::Decode { .. })));
}

#[test]
fn hostile_length_prefix_does_not_allocate() {
    // Field 7 (graph), length-delimited, claiming 2^35 bytes, followed by almost nothing.
    let mut bytes = vec![0x08, 0x08, 0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    bytes.extend_from_slice(&[0u8; 16]);
    let err = load(&bytes).unwrap_err();
    assert!(matches!(err, OnnxError::Decode { .. }), "{err}");
    // A tensor whose dims claim 2^62 elements but carry 4 bytes must not allocate either.
    let mut model = ModelProto::decode(valid_model_bytes().as_slice()).unwrap();
    let graph = model.graph.as_mut().unwrap();
    graph.initializer[0].dims = vec![1 << 31, 1 << 31];
    let name = graph.initializer[0].name().to_string();
    let err = load(&model.encode_to_vec()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&format!("initializer `{name}`")), "{msg}");
}

fn tiny_graph_model(graph: GraphProto) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn value_info(name: &str) -> ValueInfoProto {
    ValueInfoProto { name: Some(name.into()), ..Default::default() }
}

#[test]
fn dangling_input_names_the_node_and_the_name() {
    let bytes = tiny_graph_model(GraphProto {
        node: vec![node("add1", "Add", &["x", "missing_weight"], &["y"])],
        input: vec![value_info("x")],
        output: vec![value_info("y")],
        ..Default::default()
    });
    let msg = load(&bytes).unwrap_err().to_string();
    assert!(msg.contains("case.onnx") && msg.contains("add1") && msg.contains("missing_weight"), "{msg}");
}

#[test]
fn undefined_graph_output_is_an_error() {
    let bytes = tiny_graph_model(GraphProto {
        node: vec![node("r", "Relu", &["x"], &["y"])],
        input: vec![value_info("x")],
        output: vec![value_info("nowhere")],
        ..Default::default()
    });
    let msg = load(&bytes).unwrap_err().to_string();
    assert!(msg.contains("nowhere"), "{msg}");
}

#[test]
fn cycle_is_an_error_that_prints_it() {
    let bytes = tiny_graph_model(GraphProto {
        node: vec![node("a", "Add", &["x", "c"], &["b"]), node("b_relu", "Relu", &["b"], &["c"])],
        input: vec![value_info("x")],
        output: vec![value_info("c")],
        ..Default::default()
    });
    let msg = load(&bytes).unwrap_err().to_string();
    assert!(msg.contains("cycle") && msg.contains("a (Add)") && msg.contains("b_relu (Relu)"), "{msg}");
}

#[test]
fn duplicate_output_name_is_an_error() {
    let bytes = tiny_graph_model(GraphProto {
        node: vec![node("first", "Relu", &["x"], &["y"]), node("second", "Neg", &["x"], &["y"])],
        input: vec![value_info("x")],
        output: vec![value_info("y")],
        ..Default::default()
    });
    let msg = load(&bytes).unwrap_err().to_string();
    assert!(msg.contains("second") && msg.contains("first") && msg.contains("`y`"), "{msg}");
}

#[test]
fn unreadable_file_names_the_path() {
    let err = load_model("/nonexistent/dir/model.onnx").unwrap_err();
    assert!(matches!(err, OnnxError::Read { .. }));
    assert!(err.to_string().contains("/nonexistent/dir/model.onnx"));
}

/// The canonical form of a model: what loading its encoding gives (ids in file order).
fn canonical(model: &Model) -> Model {
    load(&model_to_bytes(model).unwrap()).unwrap()
}

fn external_model(dir: &std::path::Path) -> (Model, PathBuf) {
    let mut g = Graph::new("g");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let values: Vec<f32> = (0..4096).map(|i| i as f32 * 0.5).collect();
    let w = g.add_initializer("w", TensorData::from_vec(vec![4096], &values).unwrap()).unwrap();
    let small = g.add_initializer("small", TensorData::from_vec(vec![2], &[1i64, 2]).unwrap()).unwrap();
    let y = g.ensure_variable("y");
    let z = g.ensure_variable("z");
    g.add_operation(Operation::new("Add", "add"), &[Some(x), Some(w)], &[Some(y)]).unwrap();
    g.add_operation(Operation::new("Reshape", "reshape"), &[Some(y), Some(small)], &[Some(z)]).unwrap();
    g.add_graph_output(z).unwrap();
    (Model::new(g, 17), dir.join("model.onnx"))
}

#[test]
fn external_data_round_trip_and_bad_locations() {
    let dir = tempfile::tempdir().unwrap();
    let (model, path) = external_model(dir.path());
    let options = mppq_onnx::SaveOptions { external_data: mppq_onnx::ExternalData::Always, size_threshold: 64 };
    mppq_onnx::save_model(&model, &path, &options).unwrap();
    assert!(dir.path().join("model.data").exists());
    assert!(std::fs::metadata(&path).unwrap().len() < 2048, "weights must not be inline");
    assert!(load_model(&path).unwrap() == canonical(&model));

    // Point the location outside the model directory, then past the end of the file.
    let mut proto = ModelProto::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
    let entries = &mut proto.graph.as_mut().unwrap().initializer[0].external_data;
    entries[0].value = Some("../model.data".into());
    std::fs::write(&path, proto.encode_to_vec()).unwrap();
    let msg = load_model(&path).unwrap_err().to_string();
    assert!(msg.contains("external data of tensor `w`") && msg.contains("relative path"), "{msg}");

    let entries = &mut proto.graph.as_mut().unwrap().initializer[0].external_data;
    entries[0].value = Some("model.data".into());
    entries[1].value = Some("1000000".into());
    std::fs::write(&path, proto.encode_to_vec()).unwrap();
    let msg = load_model(&path).unwrap_err().to_string();
    assert!(msg.contains("outside"), "{msg}");

    // A data file that is a symbolic link to a file outside the folder is not read (it was, and
    // its bytes were written into the exported float model).
    #[cfg(unix)]
    {
        let outside = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("model.data"), outside.path().join("stolen.data")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("stolen.data"), dir.path().join("link.data")).unwrap();
        let entries = &mut proto.graph.as_mut().unwrap().initializer[0].external_data;
        entries[0].value = Some("link.data".into());
        entries[1].value = Some("0".into());
        std::fs::write(&path, proto.encode_to_vec()).unwrap();
        let msg = load_model(&path).unwrap_err().to_string();
        assert!(msg.contains("external data of tensor `w`") && msg.contains("symbolic link"), "{msg}");
    }
}

#[test]
fn failed_save_keeps_the_previous_file() {
    let dir = tempfile::tempdir().unwrap();
    let (model, path) = external_model(dir.path());
    std::fs::write(&path, b"previous").unwrap();
    // Saving into a directory that does not exist fails and touches nothing.
    let bad = dir.path().join("missing/model.onnx");
    assert!(mppq_onnx::save_model(&model, &bad, &Default::default()).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"previous");
    mppq_onnx::save_model(&model, &path, &Default::default()).unwrap();
    assert!(load_model(&path).unwrap() == canonical(&model));
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary files are left behind");
}

#[test]
fn in_memory_encoding_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = external_model(dir.path());
    let once = canonical(&model);
    assert!(canonical(&once) == once);
    assert_eq!(once.graph.num_operations(), 2);
    assert_eq!(once.graph.initializers().count(), 2);
}

/// Over 2 GiB of initializers: saved with external data (protobuf cannot hold it inline) and
/// loaded back bit-identical. Written under Cargo's target directory, not the system's temporary
/// directory, which is often a small tmpfs (CI's ran out of space here).
#[test]
fn models_over_two_gib_use_external_data() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut g = Graph::new("big");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let len = (2usize << 30) + 4096;
    let mut bytes = vec![0u8; len];
    bytes.iter_mut().step_by(4093).enumerate().for_each(|(i, b)| *b = i as u8);
    let w =
        g.add_initializer("w", TensorData::from_packed(mppq_ir::DataType::Uint8, vec![len], bytes).unwrap()).unwrap();
    let y = g.ensure_variable("y");
    g.add_operation(Operation::new("Add", "add"), &[Some(x), Some(w)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let model = Model::new(g, 17);
    let path = dir.path().join("big.onnx");
    mppq_onnx::save_model(&model, &path, &Default::default()).unwrap();
    assert!(std::fs::metadata(dir.path().join("big.data")).unwrap().len() >= len as u64);
    let back = load_model(&path).unwrap();
    let w_back = back.graph.var_id("w").and_then(|id| back.graph.variable(id).ok()?.value.as_ref());
    let w_orig = model.graph.variable(w).unwrap().value.as_ref();
    assert!(w_back == w_orig, "2 GiB tensor differs after reload");
}
