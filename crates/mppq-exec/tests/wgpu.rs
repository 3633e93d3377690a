//! The executor on Burn's wgpu backend (feature `wgpu`; Mesa lavapipe without a GPU): the
//! stand-ins of tensors the device cannot hold as ONNX describes them (rank-0 scalars, 8/16-bit
//! ints, Native bools) still report ONNX shapes and types and give the CPU's numbers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
#![cfg(feature = "wgpu")]

use mppq_exec::{Device, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Attribute, DataType, Graph, Operation, TensorData};

/// Runs a chain of single-output operators on `inputs` (fed as `in0`, `in1`, …): the first
/// operator reads every input, each later one the previous output. Returns the last output.
fn run_chain(device: &Device, ops: Vec<Operation>, inputs: &[TensorData]) -> Tensor {
    let mut g = Graph::new("g");
    let mut ins = Vec::new();
    for i in 0..inputs.len() {
        let v = g.ensure_variable(&format!("in{i}"));
        g.add_graph_input(v).unwrap();
        ins.push(Some(v));
    }
    let mut last = ins;
    for (k, op) in ops.into_iter().enumerate() {
        let out = g.ensure_variable(&format!("out{k}"));
        g.add_operation(op.with_opset(17), &last, &[Some(out)]).unwrap();
        last = vec![Some(out)];
    }
    g.add_graph_output(last[0].unwrap()).unwrap();
    let exec = Executor::new(&g, &OpRegistry::builtin(), device, &|_| 17).unwrap();
    let feeds = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("in{i}"), Value::Tensor(Tensor::from_data(t, device).unwrap())))
        .collect();
    let out = exec.run(feeds, &mut []).unwrap();
    out[0].1.as_tensor().unwrap().clone()
}

#[test]
fn scalar_inputs_keep_rank_zero() {
    let device = Device::wgpu();
    let s = Tensor::from_data(&TensorData::scalar(2.5f32), &device).unwrap();
    assert_eq!((s.shape(), s.rank(), s.to_f32_vec()), (vec![], 0, vec![2.5]));
    assert_eq!(s.to_data().unwrap().shape(), &[] as &[usize]);
    // Clip with scalar min/max (rank-0 tensors crashed cubecl's allocator).
    let x = TensorData::from_vec(vec![4], &[-3.0f32, 0.5, 2.0, -0.25]).unwrap();
    let y = run_chain(
        &device,
        vec![Operation::new("Clip", "clip")],
        &[x, TensorData::scalar(-1.0f32), TensorData::scalar(1.0f32)],
    );
    assert_eq!(y.shape(), vec![4]);
    assert_eq!(y.to_f32_vec(), vec![-1.0, 0.5, 1.0, -0.25]);
}

#[test]
fn element_wise_results_of_scalars_are_scalars() {
    // Mul of two scalars, as a shape computation does (the bench's detect_branch: H·W of a
    // Shape), then Neg: each result is rank 0 (held as [1], reported as []), so an Unsqueeze
    // after them gives [1], not [1, 1].
    let device = Device::wgpu();
    let (a, b) = (TensorData::scalar(3i64), TensorData::scalar(4i64));
    let y = run_chain(&device, vec![Operation::new("Mul", "mul"), Operation::new("Neg", "neg")], &[a, b]);
    assert_eq!((y.shape(), y.to_i64_vec()), (vec![], vec![-12]));
}

#[test]
fn comparisons_give_bools() {
    let device = Device::wgpu();
    let a = TensorData::from_vec(vec![3], &[1.0f32, 5.0, 3.0]).unwrap();
    let b = TensorData::from_vec(vec![3], &[2.0f32, 2.0, 3.0]).unwrap();
    let y = run_chain(&device, vec![Operation::new("GreaterOrEqual", "ge"), Operation::new("Not", "not")], &[a, b]);
    assert_eq!(y.dtype(), DataType::Bool);
    assert_eq!(y.to_i64_vec(), vec![1, 0, 0]);
    let back = y.to_data().unwrap();
    assert_eq!(back.to_vec::<bool>().unwrap(), vec![true, false, false]);
}

#[test]
fn int8_computes_in_i32_and_wraps() {
    let device = Device::wgpu();
    assert!(
        !device.supports_dtype(burn::tensor::DType::I8),
        "lavapipe has no 8-bit ints; this test checks the stand-in"
    );
    let a = TensorData::from_vec(vec![3], &[100i8, -100, 3]).unwrap();
    let b = TensorData::from_vec(vec![3], &[100i8, -100, 4]).unwrap();
    let y = run_chain(&device, vec![Operation::new("Add", "add")], &[a, b]);
    assert_eq!(y.dtype(), DataType::Int8);
    assert_eq!(y.to_i64_vec(), vec![-56, 56, 7]);
    assert_eq!(y.to_data().unwrap().to_vec::<i8>().unwrap(), vec![-56, 56, 7]);
}

#[test]
fn cast_to_uint8_wraps_on_the_device() {
    let device = Device::wgpu();
    let x = TensorData::from_vec(vec![3], &[300i32, -1, 7]).unwrap();
    let to_u8 = Operation::new("Cast", "to_u8").with_attr("to", Attribute::Int(2));
    let to_f32 = Operation::new("Cast", "to_f32").with_attr("to", Attribute::Int(1));
    // Read back as uint8, and used on the device (the float cast sees the wrapped values).
    let y = run_chain(&device, vec![to_u8.clone()], std::slice::from_ref(&x));
    assert_eq!((y.dtype(), y.to_i64_vec()), (DataType::Uint8, vec![44, 255, 7]));
    let z = run_chain(&device, vec![to_u8, to_f32], &[x]);
    assert_eq!((z.dtype(), z.to_f32_vec()), (DataType::Float, vec![44.0, 255.0, 7.0]));
}
