//! Unit tests for the sequence operators the ONNX backend suite does not exercise directly
//! (ConcatFromSequence, SequenceErase, SequenceLength, Scan output axes/directions).

use crate::{Device, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Attribute, Graph, Operation};

/// Runs a one-node graph with tensor inputs named `in0..` and returns the single output.
fn run_one(op: Operation, inputs: Vec<Value>, opset: i64) -> crate::error::Result<Value> {
    let mut g = Graph::new("g");
    let ins: Vec<_> = (0..inputs.len()).map(|i| g.ensure_variable(&format!("in{i}"))).collect();
    for v in &ins {
        g.add_graph_input(*v).unwrap();
    }
    let y = g.ensure_variable("y");
    let ins_opt: Vec<_> = ins.iter().map(|v| Some(*v)).collect();
    g.add_operation(op.with_opset(opset), &ins_opt, &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let device = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| opset)?;
    let feeds = inputs.into_iter().enumerate().map(|(i, v)| (format!("in{i}"), v)).collect();
    Ok(exec.run(feeds, &mut [])?.remove(0).1)
}

fn seq() -> Value {
    let d = Device::cpu();
    Value::Sequence(vec![
        Tensor::from_f32(&[1, 2], vec![1.0, 2.0], &d),
        Tensor::from_f32(&[1, 2], vec![3.0, 4.0], &d),
        Tensor::from_f32(&[1, 2], vec![5.0, 6.0], &d),
    ])
}

#[test]
fn concat_from_sequence_concatenates_and_stacks() {
    let op = Operation::new("ConcatFromSequence", "c").with_attr("axis", Attribute::Int(-1));
    let out = run_one(op, vec![seq()], 11).unwrap();
    let t = out.as_tensor().unwrap();
    assert_eq!(t.shape(), vec![1, 6]);
    assert_eq!(t.to_f32_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let op = Operation::new("ConcatFromSequence", "c")
        .with_attr("axis", Attribute::Int(-1))
        .with_attr("new_axis", Attribute::Int(1));
    let out = run_one(op, vec![seq()], 11).unwrap();
    let t = out.as_tensor().unwrap();
    assert_eq!(t.shape(), vec![1, 2, 3]);
    assert_eq!(t.to_f32_vec(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);

    let op = Operation::new("ConcatFromSequence", "c").with_attr("axis", Attribute::Int(3));
    assert!(run_one(op, vec![seq()], 11).is_err());
    let op = Operation::new("ConcatFromSequence", "c").with_attr("axis", Attribute::Int(0));
    assert!(run_one(op, vec![Value::Sequence(vec![])], 11).is_err());
}

#[test]
fn erase_length_and_at_check_positions() {
    let d = Device::cpu();
    let out = run_one(Operation::new("SequenceErase", "e"), vec![seq()], 11).unwrap();
    let Value::Sequence(s) = out else { panic!("not a sequence") };
    assert_eq!(s.len(), 2);
    let pos = |p: i64| Value::Tensor(Tensor::from_i64(&[], vec![p], &d));
    let out = run_one(Operation::new("SequenceErase", "e"), vec![seq(), pos(-3)], 11).unwrap();
    let Value::Sequence(s) = out else { panic!("not a sequence") };
    assert_eq!(s[0].to_f32_vec(), vec![3.0, 4.0]);
    assert!(run_one(Operation::new("SequenceErase", "e"), vec![seq(), pos(3)], 11).is_err());
    assert!(run_one(Operation::new("SequenceAt", "a"), vec![seq(), pos(-4)], 11).is_err());
    let out = run_one(Operation::new("SequenceLength", "l"), vec![seq()], 11).unwrap();
    let t = out.as_tensor().unwrap();
    assert_eq!((t.dtype(), t.to_i64_vec()), (mppq_ir::DataType::Int64, vec![3]));
}

/// body(s, x): s' = s + x; outputs (s', s').
fn add_body() -> Graph {
    let mut g = Graph::new("body");
    let (s, x, y) = (g.ensure_variable("s"), g.ensure_variable("x"), g.ensure_variable("s_next"));
    g.add_graph_input(s).unwrap();
    g.add_graph_input(x).unwrap();
    g.add_operation(Operation::new("Add", "add").with_opset(13), &[Some(s), Some(x)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    g.add_graph_output(y).unwrap();
    g
}

#[test]
fn scan_reverses_and_places_outputs_on_the_given_axis() {
    let d = Device::cpu();
    let mut g = Graph::new("outer");
    let (s0, xs) = (g.ensure_variable("s0"), g.ensure_variable("xs"));
    let (sf, ys) = (g.ensure_variable("sf"), g.ensure_variable("ys"));
    g.add_graph_input(s0).unwrap();
    g.add_graph_input(xs).unwrap();
    let node = Operation::new("Scan", "scan")
        .with_opset(16)
        .with_attr("body", Attribute::Graph(Box::new(add_body())))
        .with_attr("num_scan_inputs", Attribute::Int(1))
        .with_attr("scan_input_axes", Attribute::Ints(vec![1]))
        .with_attr("scan_input_directions", Attribute::Ints(vec![1]))
        .with_attr("scan_output_axes", Attribute::Ints(vec![-1]));
    g.add_operation(node, &[Some(s0), Some(xs)], &[Some(sf), Some(ys)]).unwrap();
    g.add_graph_output(sf).unwrap();
    g.add_graph_output(ys).unwrap();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &d, &|_| 16).unwrap();
    // xs is [2, 3]: scanning axis 1 backwards adds columns 2, 1, 0.
    let feeds = vec![
        ("s0".to_string(), Value::Tensor(Tensor::from_f32(&[2], vec![0.0, 0.0], &d))),
        ("xs".to_string(), Value::Tensor(Tensor::from_f32(&[2, 3], vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0], &d))),
    ];
    let out = exec.run(feeds, &mut []).unwrap();
    assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![6.0, 60.0]);
    let ys = out[1].1.as_tensor().unwrap();
    assert_eq!(ys.shape(), vec![2, 3]);
    assert_eq!(ys.to_f32_vec(), vec![3.0, 5.0, 6.0, 30.0, 50.0, 60.0]);
}
