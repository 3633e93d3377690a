//! Unit tests across families for what the ONNX backend suite leaves out: per-row/per-column zero
//! points, complex DFT with padding, unsorted Unique along an axis, and inputs that must be errors.

use crate::device::Device;
use crate::error::Result;
use crate::kernel::{KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use mppq_ir::{Attribute, DataType, Operation};
use std::collections::HashMap;

/// Builds `op_type` from the built-in registry and runs it once (shared with the families' tests).
pub(super) fn run(
    op_type: &str,
    opset: i64,
    attrs: Vec<(&str, Attribute)>,
    inputs: Vec<Option<Tensor>>,
) -> Result<Vec<Tensor>> {
    let device = Device::cpu();
    let registry = OpRegistry::builtin();
    let mut op = Operation::new(op_type, "n");
    for (k, v) in attrs {
        op.attributes.insert(k.to_string(), v);
    }
    let node = OpNode { op: &op, opset, device: &device, registry: &registry };
    let kernel = registry.build(&node)?;
    let captured = HashMap::new();
    let ctx = KernelContext {
        device: &device,
        node: "n",
        op_type,
        captured: &captured,
        subgraph_hooks: Default::default(),
        integer_codes: None,
    };
    let out = kernel.run(&ctx, inputs.into_iter().map(|t| t.map(Value::Tensor)).collect())?;
    Ok(out.into_iter().flatten().filter_map(Value::into_tensor).collect())
}

pub(super) fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64(shape, v.to_vec(), &Device::cpu())
}

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(shape, v.to_vec(), &Device::cpu())
}

fn u8s(shape: &[usize], v: &[i64]) -> Tensor {
    i64s(shape, v).cast(DataType::Uint8).unwrap_or_else(|_| i64s(&[0], &[]))
}

#[test]
fn matmul_integer_per_row_and_per_column_zero_points() {
    let a = [1i64, 2, 3, 4, 5, 6]; // [2, 3]
    let b = [7i64, 8, 9, 10, 11, 12]; // [3, 2]
    let (az, bz) = ([1i64, 2], [3i64, 4]);
    let out = run(
        "MatMulInteger",
        10,
        vec![],
        vec![Some(u8s(&[2, 3], &a)), Some(u8s(&[3, 2], &b)), Some(u8s(&[2], &az)), Some(u8s(&[2], &bz))],
    );
    let y = out.as_ref().map(|v| (v[0].dtype(), v[0].shape(), v[0].to_i64_vec()));
    let mut want = vec![0i64; 4];
    for i in 0..2 {
        for j in 0..2 {
            want[i * 2 + j] = (0..3).map(|k| (a[i * 3 + k] - az[i]) * (b[k * 2 + j] - bz[j])).sum();
        }
    }
    assert_eq!(y.ok(), Some((DataType::Int32, vec![2, 2], want)));
}

#[test]
fn complex_dft_with_zero_padding_matches_naive() {
    // Signal [1, 3, 2] (complex), dft_length 4 along axis 1.
    let x = [1.0f32, 0.5, -2.0, 1.0, 0.25, -1.5];
    let out = run("DFT", 20, vec![], vec![Some(f32s(&[1, 3, 2], &x)), Some(i64s(&[], &[4])), Some(i64s(&[], &[1]))]);
    let got = out.map(|v| (v[0].shape(), v[0].to_f64_vec())).ok();
    let mut want = Vec::new();
    for k in 0..4 {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for n in 0..3 {
            let (xr, xi) = (x[2 * n] as f64, x[2 * n + 1] as f64);
            let ang = -2.0 * std::f64::consts::PI * (k * n) as f64 / 4.0;
            re += xr * ang.cos() - xi * ang.sin();
            im += xr * ang.sin() + xi * ang.cos();
        }
        want.push(re);
        want.push(im);
    }
    let (shape, v) = got.unwrap_or_default();
    assert_eq!(shape, vec![1, 4, 2]);
    assert!(v.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-5), "{v:?} vs {want:?}");
}

#[test]
fn unique_unsorted_along_axis_keeps_first_occurrence_order() {
    // Rows: [2,1], [0,5], [2,1], [0,4]
    let x = i64s(&[4, 2], &[2, 1, 0, 5, 2, 1, 0, 4]);
    let out = run("Unique", 11, vec![("axis", Attribute::Int(0)), ("sorted", Attribute::Int(0))], vec![Some(x)]);
    let v: Vec<Vec<i64>> = out.map(|v| v.iter().map(Tensor::to_i64_vec).collect()).unwrap_or_default();
    assert_eq!(v, vec![vec![2, 1, 0, 5, 0, 4], vec![0, 1, 3], vec![0, 1, 0, 2], vec![2, 1, 1]]);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    // NLL target class out of range.
    let x = f32s(&[1, 2], &[-0.5, -1.0]);
    assert!(run("NegativeLogLikelihoodLoss", 13, vec![], vec![Some(x), Some(i64s(&[1], &[5]))]).is_err());
    // Det of a non-square matrix.
    assert!(run("Det", 11, vec![], vec![Some(f32s(&[2, 3], &[0.0; 6]))]).is_err());
    // STFT frame longer than the signal.
    let s = f32s(&[1, 4, 1], &[0.0; 4]);
    assert!(run("STFT", 17, vec![], vec![Some(s), Some(i64s(&[], &[1])), None, Some(i64s(&[], &[8]))]).is_err());
    // MatMulInteger with mismatched inner dims (caught by the MatMul kernel's checks).
    let r = run("MatMulInteger", 10, vec![], vec![Some(u8s(&[2, 3], &[0; 6])), Some(u8s(&[2, 2], &[0; 4]))]);
    assert!(r.is_err());
}
