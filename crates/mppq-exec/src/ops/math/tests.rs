//! Unit tests for behaviour the ONNX backend suite does not cover: integer Abs/Neg/Sign/Relu,
//! integer division by zero as an error, opset<7 `broadcast`/`axis`, mixed operand types, Cast
//! to a type that cannot be held (string, complex), and three-way broadcasting in Where.

use crate::{Device, ExecError, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Attribute, Graph, Operation};

/// Runs one node with the given inputs; returns its first output.
fn run(op: Operation, inputs: Vec<Tensor>) -> crate::Result<Tensor> {
    let mut g = Graph::new("g");
    let mut ins = Vec::new();
    for i in 0..inputs.len() {
        let v = g.ensure_variable(&format!("in{i}"));
        g.add_graph_input(v)?;
        ins.push(Some(v));
    }
    let y = g.ensure_variable("y");
    g.add_operation(op, &ins, &[Some(y)])?;
    g.add_graph_output(y)?;
    let device = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 17)?;
    let feeds: Vec<(String, Value)> =
        inputs.into_iter().enumerate().map(|(i, t)| (format!("in{i}"), t.into())).collect();
    let out = exec.run(feeds, &mut [])?;
    Ok(out.into_iter().next().and_then(|(_, v)| v.into_tensor()).expect("one tensor output"))
}

fn ints(v: &[i64]) -> Tensor {
    Tensor::from_i64(&[v.len()], v.to_vec(), &Device::cpu())
}

#[test]
fn integer_unary_functions_keep_int64() {
    let x = [-3i64, 0, 5];
    for (op, want) in [("Abs", [3, 0, 5]), ("Neg", [3, 0, -5]), ("Sign", [-1, 0, 1]), ("Relu", [0, 0, 5])] {
        let y = run(Operation::new(op, "n").with_opset(17), vec![ints(&x)]).unwrap();
        assert_eq!(y.dtype(), mppq_ir::DataType::Int64, "{op}");
        assert_eq!(y.to_i64_vec(), want, "{op}");
    }
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for op in ["Div", "Mod"] {
        let err = run(Operation::new(op, "d").with_opset(17), vec![ints(&[1, 2]), ints(&[1, 0])]).unwrap_err();
        assert!(err.to_string().contains("division by zero"), "{err}");
    }
}

#[test]
fn legacy_broadcast_axis_aligns_the_second_operand() {
    let dev = Device::cpu();
    let a = Tensor::from_f32(&[2, 3, 2], vec![0.0; 12], &dev);
    let b = Tensor::from_f32(&[3], vec![1.0, 2.0, 3.0], &dev);
    let op = Operation::new("Add", "a")
        .with_opset(6)
        .with_attr("broadcast", Attribute::Int(1))
        .with_attr("axis", Attribute::Int(1));
    let y = run(op, vec![a, b]).unwrap();
    assert_eq!(y.shape(), vec![2, 3, 2]);
    assert_eq!(y.to_f32_vec(), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
}

#[test]
fn mixed_operand_types_are_an_error() {
    let dev = Device::cpu();
    let err = run(
        Operation::new("Add", "a").with_opset(17),
        vec![Tensor::from_f32(&[2], vec![1.0, 2.0], &dev), ints(&[1, 2])],
    )
    .unwrap_err();
    assert!(err.to_string().contains("different types"), "{err}");
}

#[test]
fn cast_to_a_type_that_cannot_be_held_is_unsupported() {
    for to in [8, 14] {
        // STRING, COMPLEX64 (FP8 and the 4/2-bit types are held by stand-in: tests/low_precision.rs)
        let op = Operation::new("Cast", "c").with_opset(21).with_attr("to", Attribute::Int(to));
        let err = run(op, vec![ints(&[1])]).unwrap_err();
        assert!(matches!(err, ExecError::Unsupported { .. }), "{err}");
    }
}

#[test]
fn where_broadcasts_all_three_inputs() {
    let dev = Device::cpu();
    let c = Tensor::from_bool(&[2, 1], vec![true, false], &dev);
    let x = Tensor::from_f32(&[3], vec![1.0, 2.0, 3.0], &dev);
    let y = Tensor::from_f32(&[], vec![9.0], &dev);
    let out = run(Operation::new("Where", "w").with_opset(17), vec![c, x, y]).unwrap();
    assert_eq!(out.shape(), vec![2, 3]);
    assert_eq!(out.to_f32_vec(), vec![1.0, 2.0, 3.0, 9.0, 9.0, 9.0]);
}

#[test]
fn integer_clip_with_min_above_max_gives_max() {
    let out = run(Operation::new("Clip", "c").with_opset(13), vec![ints(&[-5, 0, 5]), ints(&[2]), ints(&[1])]).unwrap();
    assert_eq!(out.to_i64_vec(), vec![1, 1, 1]);
}

#[test]
fn signed_division_overflow_is_an_error() {
    let err = run(Operation::new("Div", "d").with_opset(17), vec![ints(&[i64::MIN]), ints(&[-1])]).unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
}

#[test]
fn max_and_min_propagate_nan_from_either_side() {
    let dev = Device::cpu();
    for op in ["Max", "Min"] {
        let a = Tensor::from_f32(&[2], vec![f32::NAN, 1.0], &dev);
        let b = Tensor::from_f32(&[2], vec![1.0, f32::NAN], &dev);
        let y = run(Operation::new(op, "m").with_opset(17), vec![a, b]).unwrap().to_f32_vec();
        assert!(y.iter().all(|v| v.is_nan()), "{op}: {y:?}");
    }
}
