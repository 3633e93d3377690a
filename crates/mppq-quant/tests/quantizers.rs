//! Every built-in dispatcher × every built-in quantizer × every testdata model: dispatch with
//! the quantizer's declared types and precision, then `init_quantization` succeeds (a
//! dispatcher never hands a quantizer a type it does not declare) and every config is valid.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_dispatch::{DispatchContext, dispatcher_by_name, dispatcher_names};
use mppq_ir::quant::QuantizationState;
use mppq_quant::quantizer::{QUANTIZER_NAMES, init_quantization, quantizer_by_name};
use std::path::PathBuf;

const MODELS: [&str; 3] = ["tiny_cnn", "tiny_transformer", "detect_branch"];

#[test]
fn every_dispatcher_with_every_quantizer_on_every_model() {
    let testdata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let dispatchers = dispatcher_names();
    assert!(dispatchers.len() >= 5, "{dispatchers:?}");
    let mut combinations = 0;
    for model in MODELS {
        let loaded = mppq_onnx::load_model(testdata.join(format!("{model}.onnx"))).unwrap();
        for q in QUANTIZER_NAMES {
            let quantizer = quantizer_by_name(q).unwrap();
            assert_eq!(quantizer.name(), q);
            for d in &dispatchers {
                let mut graph = loaded.graph.clone();
                let ctx = DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
                dispatcher_by_name(d).unwrap().dispatch(&graph, &ctx).unwrap().apply(&mut graph).unwrap();
                let n = init_quantization(&mut graph, quantizer.as_ref())
                    .unwrap_or_else(|e| panic!("{model} / {d} / {q}: {e}"));
                // `weight-only` has nothing to do on a model without MatMul/Gemm (a CNN).
                let products = graph.operations().any(|(_, op)| matches!(op.op_type.as_str(), "MatMul" | "Gemm"));
                assert!(n > 0 || (q == "weight-only" && !products), "{model} / {d} / {q}: nothing quantized");
                for (_, op) in graph.operations() {
                    for c in
                        op.quant_config.iter().flat_map(|c| c.input_configs.iter().chain(&c.output_configs)).flatten()
                    {
                        c.validate().unwrap_or_else(|e| panic!("{model} / {d} / {q} / {}: {e}", op.name));
                        assert!(matches!(c.state, QuantizationState::Initial | QuantizationState::PassiveInit));
                    }
                }
                combinations += 1;
            }
        }
    }
    assert_eq!(combinations, MODELS.len() * QUANTIZER_NAMES.len() * dispatchers.len());
}

#[test]
fn quantizer_settings_reach_the_configs() {
    let testdata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut graph = mppq_onnx::load_model(testdata.join("tiny_cnn.onnx")).unwrap().graph;
    let quantizer = quantizer_by_name("lowbit").unwrap();
    let ctx = DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
    dispatcher_by_name("allin").unwrap().dispatch(&graph, &ctx).unwrap().apply(&mut graph).unwrap();
    init_quantization(&mut graph, quantizer.as_ref()).unwrap();
    let conv = graph.operation(graph.op_id("conv1").unwrap()).unwrap().quant_config.clone().unwrap();
    let w = conv.input_configs[1].as_ref().unwrap();
    assert_eq!((w.num_of_bits, w.quant_min, w.quant_max, w.channel_axis), (4, -8, 7, Some(0)));
    let a = conv.input_configs[0].as_ref().unwrap();
    assert_eq!((a.num_of_bits, a.quant_min, a.quant_max), (8, 0, 255));
    assert_eq!(conv.input_configs[2].as_ref().unwrap().state, QuantizationState::PassiveInit);

    let err = quantizer_by_name("int3").err().unwrap().to_string();
    assert!(err.contains("int3") && err.contains("fp8-e5m2"), "{err}");
}

/// LSTM/GRU/RNN: the default quantizer quantizes W and R per gate row (axis 1) and nothing else
/// (ORT runs the float cell on dequantized weights; Q/DQ elsewhere would only add rounding).
#[test]
fn recurrent_cells_get_weight_only_configs() {
    use mppq_ir::{Graph, Operation, TensorData};
    for (ty, gates) in [("LSTM", 4), ("GRU", 3), ("RNN", 1)] {
        let (hidden, input) = (8usize, 5usize);
        let mut g = Graph::new(ty);
        let x = g.ensure_variable("x");
        g.add_graph_input(x).unwrap();
        let w = TensorData::from_vec(vec![1, gates * hidden, input], &vec![0.1f32; gates * hidden * input]).unwrap();
        let r = TensorData::from_vec(vec![1, gates * hidden, hidden], &vec![0.2f32; gates * hidden * hidden]).unwrap();
        let b = TensorData::from_vec(vec![1, 2 * gates * hidden], &vec![0.0f32; 2 * gates * hidden]).unwrap();
        let (w, r, b) = (
            g.add_initializer("w", w).unwrap(),
            g.add_initializer("r", r).unwrap(),
            g.add_initializer("b", b).unwrap(),
        );
        let y = g.ensure_variable("y");
        let op = Operation::new(ty, "cell").with_attr("hidden_size", mppq_ir::Attribute::Int(hidden as i64));
        g.add_operation(op, &[Some(x), Some(w), Some(r), Some(b)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        let quantizer = quantizer_by_name("default").unwrap();
        let ctx = DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
        dispatcher_by_name("allin").unwrap().dispatch(&g, &ctx).unwrap().apply(&mut g).unwrap();
        init_quantization(&mut g, quantizer.as_ref()).unwrap();
        let qc = g.operation(g.op_id("cell").unwrap()).unwrap().quant_config.clone().unwrap();
        let axes: Vec<Option<Option<usize>>> =
            qc.input_configs.iter().map(|c| c.as_ref().map(|c| c.channel_axis)).collect();
        assert_eq!(axes, vec![None, Some(Some(1)), Some(Some(1)), None], "{ty}");
        assert!(qc.output_configs.iter().all(Option::is_none), "{ty}");
    }
}
