//! Dispatchers on the testdata models and small built graphs: the shape branch is SOI, no
//! undeclared type is quantized, the ignored scope holds, and conservative/aggressive differ
//! where they should, with the reasons.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_dispatch::{
    Dispatch, DispatchContext, DispatchError, Dispatcher, IgnoredScope, TargetPrecision, dispatcher_by_name,
    dispatcher_names, register_dispatcher,
};
use mppq_ir::{Graph, Model, Operation};
use std::sync::Arc;

const BUILTINS: [&str; 5] = ["allin", "aggressive", "conservative", "perseus", "pointwise"];

/// A generous quantizer: everything these models contain except the SOI-only ops.
const TYPES: &[&str] = &[
    "Conv",
    "Relu",
    "Add",
    "Gemm",
    "MatMul",
    "MaxPool",
    "BatchNormalization",
    "GlobalAveragePool",
    "Flatten",
    "Concat",
    "Reshape",
    "Transpose",
    "Mul",
    "Softmax",
    "LayerNormalization",
    "Sigmoid",
    "Gather",
    "Unsqueeze",
    "Shape",
    "Div",
    "Erf",
];

fn load(name: &str) -> Model {
    let path = format!("{}/../../testdata/{name}.onnx", env!("CARGO_MANIFEST_DIR"));
    mppq_onnx::load_model(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ctx(types: &[&str]) -> DispatchContext {
    DispatchContext::new(TargetPrecision::Int8, types.iter().copied())
}

fn run(name: &str, graph: &Graph, ctx: &DispatchContext) -> Dispatch {
    dispatcher_by_name(name).unwrap().dispatch(graph, ctx).unwrap()
}

fn decision<'a>(d: &'a Dispatch, op: &str) -> (TargetPrecision, &'a str) {
    let dec = d.by_name(op).unwrap_or_else(|| panic!("no decision for `{op}`\n{d}"));
    (dec.precision, dec.reason.as_str())
}

#[test]
fn registry_lists_builtins_and_rejects_unknown_names() {
    let names = dispatcher_names();
    for b in BUILTINS {
        assert!(names.iter().any(|n| n == b), "{b} missing from {names:?}");
    }
    let Err(err) = dispatcher_by_name("nope") else { panic!("`nope` resolved") };
    let msg = err.to_string();
    assert!(msg.contains("unknown dispatcher `nope`") && msg.contains("conservative"), "{msg}");
}

struct AllFp32;

impl Dispatcher for AllFp32 {
    fn name(&self) -> &str {
        "test-all-fp32"
    }

    fn dispatch(&self, graph: &Graph, _ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let mut d = Dispatch::new(self.name());
        for (id, op) in graph.operations() {
            d.insert(
                id,
                mppq_dispatch::Decision {
                    op_name: op.name.clone(),
                    op_type: op.op_type.clone(),
                    precision: TargetPrecision::Fp32,
                    reason: "user rule".into(),
                },
            );
        }
        Ok(d)
    }
}

#[test]
fn user_dispatchers_register_once() {
    register_dispatcher(Arc::new(AllFp32)).unwrap();
    assert!(matches!(register_dispatcher(Arc::new(AllFp32)), Err(DispatchError::DuplicateDispatcher(_))));
    let model = load("tiny_cnn");
    let d = run("test-all-fp32", &model.graph, &ctx(TYPES));
    assert_eq!(decision(&d, "conv1"), (TargetPrecision::Fp32, "user rule"));
}

#[test]
fn a_float_precision_is_refused() {
    let model = load("tiny_cnn");
    let c = DispatchContext::new(TargetPrecision::Fp32, ["Conv"]);
    let err = dispatcher_by_name("conservative").unwrap().dispatch(&model.graph, &c).unwrap_err();
    assert!(matches!(err, DispatchError::NotQuantized(_)), "{err}");
}

#[test]
fn detect_branch_shape_branch_is_soi_and_convs_quantized() {
    let model = load("detect_branch");
    for precision in [TargetPrecision::Int8, TargetPrecision::Int16] {
        let c = DispatchContext::new(precision, TYPES.iter().copied());
        for name in BUILTINS {
            let d = run(name, &model.graph, &c);
            assert_eq!(d.len(), model.graph.num_operations());
            for op in [
                "shape",
                "gather_batch",
                "unsqueeze_batch",
                "gather_h",
                "gather_w",
                "mul_hw",
                "unsqueeze_hw",
                "concat_flat_shape",
                "concat_score_shape",
            ] {
                assert_eq!(decision(&d, op).0, TargetPrecision::Soi, "{name}: {op}\n{d}");
            }
            assert_eq!(decision(&d, "shape").1, "shape/index source (Shape)");
            for op in ["backbone.conv1", "backbone.conv2", "head.cls"] {
                assert_eq!(decision(&d, op).0, precision, "{name}: {op}\n{d}");
            }
            // The Reshapes carry activations: never SOI.
            for op in ["reshape_features", "reshape_scores"] {
                assert_ne!(decision(&d, op).0, TargetPrecision::Soi, "{name}: {op}");
            }
        }
    }
}

#[test]
fn no_undeclared_type_is_ever_quantized() {
    let sets: Vec<Vec<&str>> = vec![
        TYPES.iter().copied().filter(|t| *t != "Gemm").collect(),
        TYPES.iter().copied().filter(|t| *t != "MatMul" && *t != "Softmax").collect(),
        TYPES.iter().copied().filter(|t| *t != "Conv").collect(),
        vec!["Conv"],
        vec![],
    ];
    for model_name in ["tiny_cnn", "tiny_transformer", "detect_branch"] {
        let model = load(model_name);
        for set in &sets {
            for name in BUILTINS {
                let d = run(name, &model.graph, &ctx(set));
                assert_eq!(d.len(), model.graph.num_operations());
                for (_, dec) in d.iter() {
                    if dec.precision.is_quantized() {
                        assert!(set.contains(&dec.op_type.as_str()), "{model_name}/{name}: {dec:?}");
                    }
                }
            }
        }
    }
    let model = load("tiny_cnn");
    let no_gemm: Vec<&str> = TYPES.iter().copied().filter(|t| *t != "Gemm").collect();
    for name in BUILTINS {
        let d = run(name, &model.graph, &ctx(&no_gemm));
        assert_eq!(decision(&d, "fc"), (TargetPrecision::Fp32, "quantizer does not declare Gemm"), "{name}");
        assert_eq!(decision(&d, "conv1").0, TargetPrecision::Int8, "{name}");
    }
}

#[test]
fn ignored_scope_by_type() {
    let model = load("tiny_transformer");
    let c = ctx(TYPES).with_ignored(IgnoredScope::default().with_type("Softmax"));
    for name in BUILTINS {
        let d = run(name, &model.graph, &c);
        for op in ["blocks.0.attn.softmax", "blocks.1.attn.softmax"] {
            assert_eq!(decision(&d, op), (TargetPrecision::Fp32, "ignored scope: type Softmax"), "{name}");
        }
        assert_eq!(decision(&d, "blocks.0.attn.qk").0, TargetPrecision::Int8, "{name}");
    }
}

#[test]
fn ignored_scope_by_name_glob() {
    let model = load("tiny_transformer");
    let c = ctx(TYPES).with_ignored(IgnoredScope::default().with_name("blocks.0.*"));
    for name in BUILTINS {
        let d = run(name, &model.graph, &c);
        for (_, dec) in d.iter().filter(|(_, dec)| dec.op_name.starts_with("blocks.0.")) {
            assert_eq!(dec.precision, TargetPrecision::Fp32, "{name}: {dec:?}");
            assert_eq!(dec.reason, "ignored scope: name matches `blocks.0.*`");
        }
        assert_eq!(decision(&d, "blocks.1.attn.q.matmul").0, TargetPrecision::Int8, "{name}");
    }
}

#[test]
fn ignored_scope_by_bounded_subgraph_and_apply() {
    let mut model = load("tiny_cnn");
    let g = &model.graph;
    let out_of = |op: &str| -> String {
        let id = g.op_id(op).unwrap();
        let v = g.operation(id).unwrap().outputs()[0].unwrap();
        g.var_name(v).to_string()
    };
    let (start, end) = (out_of("relu2"), out_of("bn3"));
    let scope = IgnoredScope::default().with_subgraph([start.as_str()], [end.as_str()]);
    let c = ctx(TYPES).with_ignored(scope);
    let d = run("aggressive", g, &c);
    for op in ["pool", "conv3", "bn3"] {
        let (p, r) = decision(&d, op);
        assert_eq!(p, TargetPrecision::Fp32, "{op}\n{d}");
        assert!(r.starts_with("ignored scope: sub-graph"), "{op}: {r}");
    }
    for op in ["conv1", "relu2", "residual", "fc"] {
        assert_eq!(decision(&d, op).0, TargetPrecision::Int8, "{op}\n{d}");
    }
    d.apply(&mut model.graph).unwrap();
    let conv3 = model.graph.op_id("conv3").unwrap();
    assert_eq!(model.graph.operation(conv3).unwrap().precision, TargetPrecision::Fp32);
    let conv1 = model.graph.op_id("conv1").unwrap();
    assert_eq!(model.graph.operation(conv1).unwrap().precision, TargetPrecision::Int8);
    // A scope naming a missing variable is an error, not a silent no-op.
    let bad = ctx(TYPES).with_ignored(IgnoredScope::default().with_subgraph(["no_such_var"], [end.as_str()]));
    let err = dispatcher_by_name("conservative").unwrap().dispatch(&model.graph, &bad).unwrap_err();
    assert!(matches!(err, DispatchError::UnknownScopeVariable(ref v) if v == "no_such_var"), "{err}");
}

#[test]
fn conservative_and_aggressive_differ_on_transformer() {
    let model = load("tiny_transformer");
    let cons = run("conservative", &model.graph, &ctx(TYPES));
    let aggr = run("aggressive", &model.graph, &ctx(TYPES));
    assert_eq!(
        decision(&cons, "blocks.0.attn.softmax"),
        (TargetPrecision::Fp32, "conservative: Softmax is precision-sensitive")
    );
    assert_eq!(
        decision(&aggr, "blocks.0.attn.softmax"),
        (TargetPrecision::Int8, "aggressive: downstream of computing op `blocks.0.attn.qk`")
    );
    assert_eq!(
        decision(&cons, "blocks.0.residual1"),
        (TargetPrecision::Fp32, "conservative: input `tokens` comes from outside the quantized region")
    );
    assert_eq!(decision(&aggr, "blocks.0.residual1").0, TargetPrecision::Int8);
    assert_eq!(decision(&cons, "blocks.0.ln2").0, TargetPrecision::Fp32);
    assert_eq!(decision(&aggr, "blocks.0.ln2").0, TargetPrecision::Int8);
    // Before the first computing op both keep FP32.
    assert_eq!(
        decision(&aggr, "blocks.0.ln1"),
        (TargetPrecision::Fp32, "aggressive: not downstream of any computing op")
    );
    assert_eq!(decision(&cons, "blocks.0.ln1").0, TargetPrecision::Fp32);
}

#[test]
fn conservative_and_aggressive_differ_on_a_residual_add_between_convs() {
    // Without MaxPool the residual Add of tiny_cnn reads one input from the quantized region
    // (bn3, after conv3) and one from outside (pool).
    let model = load("tiny_cnn");
    let types: Vec<&str> = TYPES.iter().copied().filter(|t| *t != "MaxPool").collect();
    let cons = run("conservative", &model.graph, &ctx(&types));
    let aggr = run("aggressive", &model.graph, &ctx(&types));
    let (p, r) = decision(&cons, "residual");
    assert_eq!(p, TargetPrecision::Fp32);
    assert!(r.starts_with("conservative: input `") && r.ends_with("` comes from outside the quantized region"), "{r}");
    assert_eq!(decision(&aggr, "residual"), (TargetPrecision::Int8, "aggressive: downstream of computing op `conv3`"));
    assert_eq!(decision(&aggr, "pool"), (TargetPrecision::Fp32, "quantizer does not declare MaxPool"));
    // Linear activations follow their producer in both.
    assert_eq!(decision(&cons, "relu3"), (TargetPrecision::Fp32, "linear activation follows `residual`"));
    assert_eq!(decision(&aggr, "relu3"), (TargetPrecision::Int8, "linear activation follows `residual`"));
    // pointwise quantizes computing ops only.
    let pw = run("pointwise", &model.graph, &ctx(&types));
    assert_eq!(decision(&pw, "relu1"), (TargetPrecision::Fp32, "pointwise: only computing ops are quantized"));
    assert_eq!(decision(&pw, "fc").0, TargetPrecision::Int8);
}

#[test]
fn shape_inputs_are_traced_backward() {
    // x -> Reshape(x, Cast(Constant)) -> MatMul(w): the Constant and the Cast compute a shape.
    let mut g = Graph::new("g");
    let x = g.ensure_variable("x");
    let shp = g.ensure_variable("shp");
    let shp64 = g.ensure_variable("shp64");
    let y = g.ensure_variable("y");
    let w = g.ensure_variable("w");
    let z = g.ensure_variable("z");
    g.add_operation(Operation::new("Constant", "shape_const"), &[], &[Some(shp)]).unwrap();
    g.add_operation(Operation::new("Cast", "cast"), &[Some(shp)], &[Some(shp64)]).unwrap();
    g.add_operation(Operation::new("Reshape", "reshape"), &[Some(x), Some(shp64)], &[Some(y)]).unwrap();
    g.add_operation(Operation::new("MatMul", "mm"), &[Some(y), Some(w)], &[Some(z)]).unwrap();
    let types = ["Constant", "Cast", "Reshape", "MatMul"];
    for name in BUILTINS {
        let d = run(name, &g, &ctx(&types));
        assert_eq!(
            decision(&d, "cast"),
            (TargetPrecision::Soi, "computes `shp64`, a shape/index input of `reshape`"),
            "{name}"
        );
        assert_eq!(decision(&d, "shape_const").0, TargetPrecision::Soi, "{name}");
        assert_eq!(decision(&d, "mm").0, TargetPrecision::Int8, "{name}");
    }
    let table = run("conservative", &g, &ctx(&types)).to_string();
    assert!(table.starts_with("operation"), "{table}");
    assert!(table.contains("cast") && table.contains("soi"), "{table}");
}

#[test]
fn a_cycle_is_an_error() {
    let mut g = Graph::new("g");
    let a = g.ensure_variable("a");
    let b = g.ensure_variable("b");
    g.add_operation(Operation::new("Relu", "r1"), &[Some(a)], &[Some(b)]).unwrap();
    g.add_operation(Operation::new("Relu", "r2"), &[Some(b)], &[Some(a)]).unwrap();
    for name in BUILTINS {
        let err = dispatcher_by_name(name).unwrap().dispatch(&g, &ctx(&["Relu"])).unwrap_err();
        assert!(matches!(err, DispatchError::Ir(_)), "{name}: {err}");
        assert!(err.to_string().contains("cycle"), "{err}");
    }
}
