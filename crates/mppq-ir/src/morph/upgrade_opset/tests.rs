//! Tests of the opset upgrade: the structure of each family's rewrite, the blockers, and that a
//! refused upgrade leaves the graph untouched. Numbers are checked against ONNX Runtime by
//! `cargo xtask opset-upgrade`.

use super::*;
use crate::dtype::DataType;
use crate::graph::{VarId, Variable};
use crate::tensor::TensorData;
use crate::value_type::{Dim, ValueType};

/// A graph `x → op → y` (more outputs when `outputs` > 1); `x` declared with `shape` when given.
fn single(op: Operation, outputs: usize, shape: Option<&[i64]>, opset: i64) -> (Graph, OpId) {
    let mut g = Graph::new("g");
    let x = g.add_variable(Variable::new("x")).unwrap();
    if let Some(s) = shape {
        g.variable_mut(x).unwrap().ty =
            Some(ValueType::tensor(DataType::Float, s.iter().map(|d| Dim::Known(*d)).collect()));
    }
    g.add_graph_input(x).unwrap();
    let outs: Vec<Option<VarId>> =
        (0..outputs).map(|i| Some(g.add_variable(Variable::new(format!("y{i}"))).unwrap())).collect();
    let id = g.add_operation(op.with_opset(opset), &[Some(x)], &outs).unwrap();
    for o in outs.iter().flatten() {
        g.add_graph_output(*o).unwrap();
    }
    (g, id)
}

fn ints_attr(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn str_attr(s: &str) -> Attribute {
    Attribute::String(s.as_bytes().to_vec())
}

/// The constant value at input `slot` of `id`.
fn input_value(g: &Graph, id: OpId, slot: usize) -> Option<TensorData> {
    let v = g.operation(id).unwrap().inputs().get(slot).copied().flatten()?;
    g.variable(v).unwrap().value.clone()
}

fn input_ints(g: &Graph, id: OpId, slot: usize) -> Vec<i64> {
    input_value(g, id, slot).unwrap().to_i64_vec().unwrap()
}

fn types(g: &Graph) -> Vec<String> {
    let order = g.topological_order().unwrap();
    order.iter().map(|id| g.operation(*id).unwrap().op_type.clone()).collect()
}

#[test]
fn axes_attributes_become_inputs_at_13_and_18() {
    for ty in ["Squeeze", "Unsqueeze", "ReduceSum"] {
        let (mut g, id) = single(Operation::new(ty, "op").with_attr("axes", ints_attr(&[0, -1])), 1, None, 12);
        let up = upgrade_opset(&mut g, 12, 13).unwrap();
        let op = g.operation(id).unwrap();
        assert!(op.attr("axes").is_none() && op.opset == 13, "{ty}");
        assert_eq!(input_ints(&g, id, 1), [0, -1], "{ty}");
        assert_eq!(input_value(&g, id, 1).unwrap().dtype(), DataType::Int64);
        assert_eq!(up.rewrites.len(), 1);
        assert_eq!(up.to_string(), format!("opset 12 → 13: rewrote 1 {ty}"));
    }
    // The other reductions keep their attribute until 18.
    let (mut g, id) = single(Operation::new("ReduceMean", "m").with_attr("axes", ints_attr(&[1])), 1, None, 11);
    assert!(upgrade_opset(&mut g, 11, 13).unwrap().rewrites.is_empty());
    assert!(g.operation(id).unwrap().attr("axes").is_some());
    let (mut g, id) = single(Operation::new("ReduceMean", "m").with_attr("axes", ints_attr(&[1])), 1, None, 11);
    upgrade_opset(&mut g, 11, 18).unwrap();
    assert_eq!(input_ints(&g, id, 1), [1]);
    // No axes: no input (all axes, as before).
    let (mut g, id) = single(Operation::new("ReduceSum", "s").with_attr("keepdims", Attribute::Int(0)), 1, None, 11);
    assert!(upgrade_opset(&mut g, 11, 21).unwrap().rewrites.is_empty());
    assert_eq!(g.operation(id).unwrap().inputs().len(), 1);
}

#[test]
fn split_moves_split_to_an_input_then_needs_num_outputs() {
    let op = Operation::new("Split", "sp").with_attr("split", ints_attr(&[2, 3])).with_attr("axis", Attribute::Int(1));
    let (mut g, id) = single(op, 2, None, 11);
    upgrade_opset(&mut g, 11, 18).unwrap();
    assert_eq!(input_ints(&g, id, 1), [2, 3]);
    assert!(g.operation(id).unwrap().attr("num_outputs").is_none());
    let (mut g, id) = single(Operation::new("Split", "sp"), 3, None, 11);
    upgrade_opset(&mut g, 11, 13).unwrap();
    assert!(g.operation(id).unwrap().attr("num_outputs").is_none(), "not before 18");
    let (mut g, id) = single(Operation::new("Split", "sp"), 3, None, 11);
    upgrade_opset(&mut g, 11, 18).unwrap();
    assert_eq!(g.operation(id).unwrap().attr_int("num_outputs", 0).unwrap(), 3);
}

#[test]
fn softmax_on_the_last_axis_only_changes_axis() {
    for (axis, rank) in [(Some(3), 4), (Some(-1), 3), (Some(1), 2), (None, 2)] {
        let mut op = Operation::new("Softmax", "sm");
        if let Some(a) = axis {
            op = op.with_attr("axis", Attribute::Int(a));
        }
        let shape = vec![2; rank];
        let (mut g, id) = single(op, 1, Some(&shape), 12);
        upgrade_opset(&mut g, 12, 13).unwrap();
        assert_eq!(types(&g), ["Softmax"], "{axis:?} rank {rank}");
        assert_eq!(g.operation(id).unwrap().attr_int("axis", 0).unwrap(), -1);
    }
}

#[test]
fn softmax_elsewhere_flattens_and_reshapes_back() {
    for (ty, shape) in [("Softmax", Some(&[2i64, 3, 4][..])), ("LogSoftmax", None), ("Hardmax", None)] {
        let (mut g, id) = single(Operation::new(ty, "sm").with_attr("axis", Attribute::Int(1)), 1, shape, 11);
        let up = upgrade_opset(&mut g, 11, 13).unwrap();
        assert_eq!(types(&g), ["Shape", "Flatten", ty, "Reshape"], "{ty}");
        let op = g.operation(id).unwrap();
        assert_eq!(op.attr_int("axis", 0).unwrap(), -1);
        // The graph output keeps its name and is what the Reshape writes.
        let y = g.outputs()[0];
        assert_eq!(g.var_name(y), "y0");
        let reshape = g.operation(g.producer(y).unwrap()).unwrap();
        assert_eq!((reshape.op_type.as_str(), reshape.opset), ("Reshape", 13));
        let flatten = g.operation(g.producer(op.inputs()[0].unwrap()).unwrap()).unwrap();
        assert_eq!(flatten.attr_int("axis", 0).unwrap(), 1);
        assert!(up.rewrites[0].change.contains("Flatten"), "{}", up.rewrites[0]);
    }
    // Default axis (1) on an unknown rank: rewritten too.
    let (mut g, _) = single(Operation::new("Softmax", "sm"), 1, None, 12);
    upgrade_opset(&mut g, 12, 13).unwrap();
    assert_eq!(types(&g), ["Shape", "Flatten", "Softmax", "Reshape"]);
}

#[test]
fn slice_topk_clip_pad_attributes_become_inputs() {
    let op = Operation::new("Slice", "sl")
        .with_attr("starts", ints_attr(&[1]))
        .with_attr("ends", ints_attr(&[i64::MAX]))
        .with_attr("axes", ints_attr(&[2]));
    let (mut g, id) = single(op, 1, None, 9);
    upgrade_opset(&mut g, 9, 13).unwrap();
    assert_eq!(
        (input_ints(&g, id, 1), input_ints(&g, id, 2), input_ints(&g, id, 3)),
        (vec![1], vec![i64::MAX], vec![2])
    );
    assert!(g.operation(id).unwrap().attributes.is_empty());

    let (mut g, id) = single(Operation::new("TopK", "tk").with_attr("k", Attribute::Int(3)), 2, None, 9);
    upgrade_opset(&mut g, 9, 13).unwrap();
    assert_eq!(input_ints(&g, id, 1), [3]);
    assert_eq!(input_value(&g, id, 1).unwrap().shape(), [1]);

    // Clip: bounds of the input's float type; an absent bound stays omitted.
    let mut g = Graph::new("g");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.variable_mut(x).unwrap().ty = Some(ValueType::tensor(DataType::Float16, vec![Dim::Known(3)]));
    g.add_graph_input(x).unwrap();
    let y = g.add_variable(Variable::new("y")).unwrap();
    let clip = Operation::new("Clip", "c").with_opset(6).with_attr("max", Attribute::Float(6.0));
    let id = g.add_operation(clip, &[Some(x)], &[Some(y)]).unwrap();
    upgrade_opset(&mut g, 6, 13).unwrap();
    let op = g.operation(id).unwrap();
    assert_eq!(op.inputs()[1], None);
    let max = input_value(&g, id, 2).unwrap();
    assert_eq!((max.dtype(), max.shape(), max.to_f32_vec().unwrap()), (DataType::Float16, &[][..], vec![6.0]));

    let op = Operation::new("Pad", "p")
        .with_attr("pads", ints_attr(&[0, 1, 0, 1]))
        .with_attr("value", Attribute::Float(-1.5))
        .with_attr("mode", str_attr("constant"));
    let (mut g, id) = single(op, 1, None, 2);
    upgrade_opset(&mut g, 2, 13).unwrap();
    assert_eq!(input_ints(&g, id, 1), [0, 1, 0, 1]);
    assert_eq!(input_value(&g, id, 2).unwrap().to_f32_vec().unwrap(), [-1.5]);
    assert_eq!(g.operation(id).unwrap().attr_string("mode", "").unwrap(), "constant");
    // Pad-1's `paddings`, reflect mode: pads only.
    let op =
        Operation::new("Pad", "p").with_attr("paddings", ints_attr(&[1, 1])).with_attr("mode", str_attr("reflect"));
    let (mut g, id) = single(op, 1, None, 1);
    upgrade_opset(&mut g, 1, 11).unwrap();
    assert_eq!(input_ints(&g, id, 1), [1, 1]);
    assert_eq!(g.operation(id).unwrap().inputs().len(), 2);
}

#[test]
fn upsample_becomes_resize_with_the_legacy_rounding() {
    // Upsample-7 (scales attribute) through 9 (input) and 10 (Resize) to Resize-13.
    let op = Operation::new("Upsample", "up").with_attr("scales", Attribute::Floats(vec![1.0, 1.0, 2.0, 2.0]));
    let (mut g, id) = single(op, 1, None, 7);
    let up = upgrade_opset(&mut g, 7, 13).unwrap();
    let op = g.operation(id).unwrap();
    assert_eq!((op.op_type.as_str(), op.opset), ("Resize", 13));
    assert_eq!(op.inputs()[1], None, "no roi from 13");
    assert_eq!(input_value(&g, id, 2).unwrap().to_f32_vec().unwrap(), [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(op.attr_string("coordinate_transformation_mode", "").unwrap(), "asymmetric");
    assert_eq!(op.attr_string("nearest_mode", "").unwrap(), "floor");
    assert_eq!(up.counts(), [("Upsample".to_string(), 1)]);
    assert_eq!(up.rewrites.len(), 3, "{:?}", up.rewrites);

    // Upsample-1 (height/width scales, bilinear) to 11: an empty roi, linear mode.
    let op = Operation::new("Upsample", "up")
        .with_attr("height_scale", Attribute::Float(2.0))
        .with_attr("width_scale", Attribute::Float(3.0))
        .with_attr("mode", str_attr("bilinear"));
    let (mut g, id) = single(op, 1, None, 1);
    upgrade_opset(&mut g, 1, 11).unwrap();
    let op = g.operation(id).unwrap();
    assert_eq!(op.attr_string("mode", "").unwrap(), "linear");
    assert!(op.attr("nearest_mode").is_none());
    assert_eq!(input_value(&g, id, 1).unwrap().shape(), [0]);
    assert_eq!(input_value(&g, id, 2).unwrap().to_f32_vec().unwrap(), [1.0, 1.0, 2.0, 3.0]);

    // Resize-10 shrinking rounds up (ONNX Runtime's legacy nearest); shrinking and growing is refused.
    let resize = |scales: &[f32]| {
        let mut g = Graph::new("g");
        let x = g.add_variable(Variable::new("x")).unwrap();
        g.add_graph_input(x).unwrap();
        let s = g.add_initializer("s", TensorData::from_vec(vec![4], scales).unwrap()).unwrap();
        let y = g.add_variable(Variable::new("y")).unwrap();
        let id =
            g.add_operation(Operation::new("Resize", "rs").with_opset(10), &[Some(x), Some(s)], &[Some(y)]).unwrap();
        (g, id)
    };
    let (mut g, id) = resize(&[1.0, 1.0, 0.5, 0.5]);
    upgrade_opset(&mut g, 10, 13).unwrap();
    assert_eq!(g.operation(id).unwrap().attr_string("nearest_mode", "").unwrap(), "ceil");
    let (mut g, _) = resize(&[1.0, 1.0, 0.5, 2.0]);
    let before = g.clone();
    let err = upgrade_opset(&mut g, 10, 13).unwrap_err().to_string();
    assert!(err.contains("`rs` (Resize, opset 10)") && err.contains("shrinks some axes"), "{err}");
    assert_eq!(g, before, "a refused upgrade changes nothing");
}

#[test]
fn tf_half_pixel_for_nn_maps_to_half_pixel() {
    for (rounding, want) in [(None, Some("ceil")), (Some("floor"), Some("round_prefer_ceil")), (Some("ceil"), None)] {
        let mut op = Operation::new("Resize", "rs")
            .with_attr("coordinate_transformation_mode", str_attr("tf_half_pixel_for_nn"));
        if let Some(r) = rounding {
            op = op.with_attr("nearest_mode", str_attr(r));
        }
        let (mut g, id) = single(op, 1, None, 11);
        match (upgrade_opset(&mut g, 11, 13), want) {
            (Ok(_), Some(w)) => {
                let op = g.operation(id).unwrap();
                assert_eq!(op.attr_string("coordinate_transformation_mode", "").unwrap(), "half_pixel");
                assert_eq!(op.attr_string("nearest_mode", "").unwrap(), w);
            }
            (Err(e), None) => assert!(e.to_string().contains("tf_half_pixel_for_nn"), "{e}"),
            (r, w) => panic!("{rounding:?}: {r:?} vs {w:?}"),
        }
    }
}

#[test]
fn legacy_broadcast_aligns_b_at_axis() {
    // A [2, 3, 4, 5] + B [3] at axis 1 (opset 6): B needs two trailing unit dimensions.
    let build = |b_const: bool, declare: bool| {
        let mut g = Graph::new("g");
        let a = g.add_variable(Variable::new("a")).unwrap();
        if declare {
            g.variable_mut(a).unwrap().ty =
                Some(ValueType::tensor(DataType::Float, [2, 3, 4, 5].map(Dim::Known).to_vec()));
        }
        g.add_graph_input(a).unwrap();
        let b = if b_const {
            g.add_initializer("b", TensorData::from_vec(vec![3], &[1.0f32, 2.0, 3.0]).unwrap()).unwrap()
        } else {
            let b = g.add_variable(Variable::new("b")).unwrap();
            g.variable_mut(b).unwrap().ty = Some(ValueType::tensor(DataType::Float, vec![Dim::Known(3)]));
            g.add_graph_input(b).unwrap();
            b
        };
        let y = g.add_variable(Variable::new("y")).unwrap();
        let add = Operation::new("Add", "add")
            .with_opset(6)
            .with_attr("broadcast", Attribute::Int(1))
            .with_attr("axis", Attribute::Int(1));
        let id = g.add_operation(add, &[Some(a), Some(b)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        (g, id)
    };
    let (mut g, id) = build(true, true);
    upgrade_opset(&mut g, 6, 13).unwrap();
    assert_eq!(input_value(&g, id, 1).unwrap().shape(), [3, 1, 1]);
    assert!(g.operation(id).unwrap().attributes.is_empty());
    let (mut g, _) = build(false, true);
    upgrade_opset(&mut g, 6, 13).unwrap();
    assert_eq!(types(&g), ["Unsqueeze", "Add"]);
    let (_, unsq) = g.operations().find(|(_, o)| o.op_type == "Unsqueeze").unwrap();
    let axes = g.variable(unsq.inputs()[1].unwrap()).unwrap().value.as_ref().unwrap().to_i64_vec().unwrap();
    assert_eq!(axes, [1, 2]);
    // Before 13 the Unsqueeze takes `axes` as an attribute.
    let (mut g, _) = build(false, true);
    upgrade_opset(&mut g, 6, 11).unwrap();
    let (_, unsq) = g.operations().find(|(_, o)| o.op_type == "Unsqueeze").unwrap();
    assert_eq!(unsq.attr_ints("axes").unwrap().unwrap(), [1, 2]);
    let (g, _) = build(true, false);
    let b = blockers(&g, 6, 13);
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].op.as_str(), b[0].op_type.as_str(), b[0].opset, b[0].at), ("add", "Add", 6, 7));
    assert!(b[0].why.contains("ranks"), "{}", b[0]);
}

#[test]
fn batchnorm_dropout_and_attributes_dropped_on_the_way() {
    let bn = Operation::new("BatchNormalization", "bn")
        .with_attr("is_test", Attribute::Int(1))
        .with_attr("spatial", Attribute::Int(1))
        .with_attr("consumed_inputs", ints_attr(&[0, 0, 0, 1, 1]));
    let (mut g, id) = single(bn, 1, None, 5);
    let up = upgrade_opset(&mut g, 5, 13).unwrap();
    assert!(g.operation(id).unwrap().attributes.is_empty());
    assert_eq!(up.rewrites.len(), 3);
    assert_eq!(up.counts(), [("BatchNormalization".to_string(), 1)]);

    let (g, _) = single(Operation::new("BatchNormalization", "bn").with_attr("spatial", Attribute::Int(0)), 1, None, 7);
    let b = blockers(&g, 7, 13);
    assert!(b.len() == 1 && b[0].at == 9 && b[0].to_string().contains("`bn` (BatchNormalization, opset 7)"), "{b:?}");

    // Training outputs: unread ones go, a read one blocks.
    let (mut g, id) = single(Operation::new("BatchNormalization", "bn"), 3, None, 9);
    let extra = g.outputs()[1..].to_vec();
    for v in extra {
        g.remove_graph_output(v).unwrap();
    }
    upgrade_opset(&mut g, 9, 15).unwrap();
    assert_eq!(g.operation(id).unwrap().outputs().len(), 1);
    let (g, _) = single(Operation::new("BatchNormalization", "bn"), 3, None, 9);
    assert_eq!(blockers(&g, 9, 15)[0].at, 14);

    let (mut g, id) = single(Operation::new("Dropout", "d").with_attr("ratio", Attribute::Float(0.25)), 1, None, 11);
    upgrade_opset(&mut g, 11, 13).unwrap();
    assert_eq!(input_value(&g, id, 1).unwrap().to_f32_vec().unwrap(), [0.25]);
    let (g, _) = single(Operation::new("Dropout", "d"), 2, None, 9);
    assert!(blockers(&g, 9, 13)[0].why.contains("mask"));
}

#[test]
fn deprecated_and_removed_operators_are_replaced() {
    let scatter = Operation::new("Scatter", "sc").with_attr("axis", Attribute::Int(1));
    let (mut g, id) = single(scatter, 1, None, 11);
    upgrade_opset(&mut g, 11, 13).unwrap();
    let op = g.operation(id).unwrap();
    assert_eq!((op.op_type.as_str(), op.attr_int("axis", 0).unwrap()), ("ScatterElements", 1));

    let scaler = Operation::new("ImageScaler", "is")
        .with_attr("scale", Attribute::Float(0.5))
        .with_attr("bias", Attribute::Floats(vec![1.0, 2.0, 3.0]));
    let (mut g, id) = single(scaler, 1, Some(&[1, 3, 4, 4]), 8);
    upgrade_opset(&mut g, 8, 13).unwrap();
    assert_eq!(types(&g), ["Mul", "Add"]);
    assert_eq!(input_value(&g, id, 1).unwrap().to_f32_vec().unwrap(), [0.5]);
    let add = g.producer(g.outputs()[0]).unwrap();
    assert_eq!(input_value(&g, add, 1).unwrap().shape(), [1, 3, 1, 1]);

    let (mut g, id) = single(Operation::new("ScaledTanh", "st").with_attr("alpha", Attribute::Float(2.0)), 1, None, 1);
    upgrade_opset(&mut g, 1, 13).unwrap();
    assert_eq!(types(&g), ["Mul", "Tanh", "Mul"]);
    assert_eq!(g.operation(id).unwrap().op_type, "Tanh");

    let (g, _) = single(Operation::new("Crop", "crop"), 1, None, 1);
    assert!(blockers(&g, 1, 13)[0].why.contains("removed at opset 10"));
}

#[test]
fn subgraphs_are_upgraded_with_names_unique_across_scopes() {
    let mut body = Graph::new("then");
    let inner_x = body.add_variable(Variable::new("x")).unwrap();
    let out = body.add_variable(Variable::new("out")).unwrap();
    let sq = Operation::new("Squeeze", "sq").with_opset(11).with_attr("axes", ints_attr(&[0]));
    let sq_id = body.add_operation(sq, &[Some(inner_x)], &[Some(out)]).unwrap();
    body.add_graph_output(out).unwrap();
    let mut g = Graph::new("g");
    let cond = g.add_variable(Variable::new("cond")).unwrap();
    let x = g.add_variable(Variable::new("x")).unwrap();
    // The outer graph already uses the name the inner rewrite would pick.
    g.add_initializer("sq_axes", TensorData::from_vec(vec![1], &[5i64]).unwrap()).unwrap();
    g.add_graph_input(cond).unwrap();
    g.add_graph_input(x).unwrap();
    let y = g.add_variable(Variable::new("y")).unwrap();
    let if_op = Operation::new("If", "if")
        .with_opset(11)
        .with_attr("then_branch", Attribute::Graph(Box::new(body.clone())))
        .with_attr("else_branch", Attribute::Graph(Box::new(body)));
    let if_id = g.add_operation(if_op, &[Some(cond)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let up = upgrade_opset(&mut g, 11, 13).unwrap();
    assert_eq!(up.rewrites.len(), 2);
    assert_eq!(g.operation(if_id).unwrap().opset, 13);
    let Some(Attribute::Graph(then)) = g.operation(if_id).unwrap().attr("then_branch") else { panic!() };
    let axes = then.operation(sq_id).unwrap().inputs()[1].unwrap();
    assert_eq!(then.var_name(axes), "sq_axes_1");
    assert_eq!(then.operation(sq_id).unwrap().opset, 13);
}

#[test]
fn later_changes_and_other_domains() {
    let (mut g, id) = single(Operation::new("RoiAlign", "ra"), 1, None, 10);
    upgrade_opset(&mut g, 10, 16).unwrap();
    assert_eq!(
        g.operation(id).unwrap().attr_string("coordinate_transformation_mode", "").unwrap(),
        "output_half_pixel"
    );
    let (mut g, id) = single(Operation::new("GridSample", "gs").with_attr("mode", str_attr("bicubic")), 1, None, 16);
    upgrade_opset(&mut g, 16, 21).unwrap();
    assert_eq!(g.operation(id).unwrap().attr_string("mode", "").unwrap(), "cubic");
    let (mut g, id) = single(Operation::new("DFT", "dft"), 1, None, 17);
    upgrade_opset(&mut g, 17, 20).unwrap();
    assert_eq!(input_value(&g, id, 2).unwrap().to_i64_vec().unwrap(), [1]);
    assert_eq!(g.operation(id).unwrap().inputs()[1], None);

    // GroupNormalization-18 → 21: per-group scale and bias repeated per channel.
    let mut g = Graph::new("g");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.variable_mut(x).unwrap().ty = Some(ValueType::tensor(DataType::Float, [1, 4, 2].map(Dim::Known).to_vec()));
    g.add_graph_input(x).unwrap();
    let s = g.add_initializer("s", TensorData::from_vec(vec![2], &[1.0f32, 2.0]).unwrap()).unwrap();
    let b = g.add_initializer("b", TensorData::from_vec(vec![2], &[0.5f32, -0.5]).unwrap()).unwrap();
    let y = g.add_variable(Variable::new("y")).unwrap();
    let gn = Operation::new("GroupNormalization", "gn").with_opset(18).with_attr("num_groups", Attribute::Int(2));
    let id = g.add_operation(gn, &[Some(x), Some(s), Some(b)], &[Some(y)]).unwrap();
    let mut dynamic = g.clone();
    upgrade_opset(&mut g, 18, 21).unwrap();
    assert_eq!(input_value(&g, id, 1).unwrap().to_f32_vec().unwrap(), [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(input_value(&g, id, 2).unwrap().to_f32_vec().unwrap(), [0.5, 0.5, -0.5, -0.5]);
    // Without a declared channel count: computed at run time.
    dynamic.variable_mut(x).unwrap().ty = None;
    upgrade_opset(&mut dynamic, 18, 21).unwrap();
    assert_eq!(dynamic.operations().filter(|(_, o)| o.op_type == "Expand").count(), 2);

    // Other domains are left alone, opset included.
    let (mut g, id) = single(Operation::new("Squeeze", "ms").with_domain("com.microsoft", 1), 1, None, 1);
    g.operation_mut(id).unwrap().attributes.insert("axes".into(), ints_attr(&[0]));
    upgrade_opset(&mut g, 12, 13).unwrap();
    let op = g.operation(id).unwrap();
    assert!(op.attr("axes").is_some() && op.opset == 1);
}

#[test]
fn every_change_is_in_order_and_documented() {
    let docs = include_str!("../upgrade_opset.rs");
    for pair in CHANGES.windows(2) {
        assert!(pair[0].at <= pair[1].at, "{} after {}", pair[0].op_types[0], pair[1].op_types[0]);
    }
    for c in CHANGES {
        for t in c.op_types.iter().filter(|t| **t != "*") {
            assert!(docs.contains(t), "{t} missing from the module documentation");
        }
    }
}

#[test]
fn ranks_are_carried_through_transpose_and_computed_shapes() {
    // x [2, 3, 4] → Shape → Concat([.., 1]) → Reshape(x, ·): rank 4; Transpose(perm of 4) keeps it.
    let mut g = Graph::new("g");
    let x = g.add_variable(Variable::new("x")).unwrap();
    g.variable_mut(x).unwrap().ty = Some(ValueType::tensor(DataType::Float, [2, 3, 4].map(Dim::Known).to_vec()));
    g.add_graph_input(x).unwrap();
    let one = g.add_initializer("one", TensorData::from_vec(vec![1], &[1i64]).unwrap()).unwrap();
    let [shape, target, r, t, y] =
        ["shape", "target", "r", "t", "y"].map(|n| g.add_variable(Variable::new(n)).unwrap());
    g.add_operation(Operation::new("Shape", "shape").with_opset(12), &[Some(x)], &[Some(shape)]).unwrap();
    let concat = Operation::new("Concat", "concat").with_opset(12).with_attr("axis", Attribute::Int(0));
    g.add_operation(concat, &[Some(shape), Some(one)], &[Some(target)]).unwrap();
    g.add_operation(Operation::new("Reshape", "reshape").with_opset(12), &[Some(x), Some(target)], &[Some(r)]).unwrap();
    let transpose = Operation::new("Transpose", "tr").with_opset(12).with_attr("perm", ints_attr(&[0, 2, 1, 3]));
    g.add_operation(transpose, &[Some(r)], &[Some(t)]).unwrap();
    let sm = Operation::new("Softmax", "sm").with_opset(12).with_attr("axis", Attribute::Int(3));
    let id = g.add_operation(sm, &[Some(t)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    upgrade_opset(&mut g, 12, 13).unwrap();
    assert_eq!(g.operation(id).unwrap().attr_int("axis", 0).unwrap(), -1);
    assert_eq!(g.num_operations(), 5, "no Flatten/Reshape added");
}
