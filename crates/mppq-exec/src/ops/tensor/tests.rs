//! Unit tests for what the ONNX backend suite leaves out: integer and boolean data, integer
//! reductions, exact int64 values, and inputs that must be errors rather than panics.

use crate::device::Device;
use crate::error::Result;
use crate::ops::tests::{i64s, run};
use crate::tensor::Tensor;
use mppq_ir::{Attribute, DataType};

fn bools(shape: &[usize], v: &[bool]) -> Tensor {
    Tensor::from_bool(shape, v.to_vec(), &Device::cpu())
}

fn first(r: Result<Vec<Tensor>>) -> Tensor {
    r.ok().and_then(|mut v| (!v.is_empty()).then(|| v.remove(0))).unwrap_or_else(|| i64s(&[0], &[]))
}

#[test]
fn int_slice_with_negative_step_is_exact() {
    let big = (1i64 << 53) + 1;
    let x = i64s(&[5], &[big, 1, 2, 3, 4]);
    let y = first(run(
        "Slice",
        13,
        vec![],
        vec![Some(x), Some(i64s(&[1], &[-1])), Some(i64s(&[1], &[i64::MIN])), None, Some(i64s(&[1], &[-2]))],
    ));
    assert_eq!(y.dtype(), DataType::Int64);
    assert_eq!(y.to_i64_vec(), vec![4, 2, big]);
}

#[test]
fn bool_data_through_layout_ops() {
    let x = bools(&[2, 2], &[true, false, false, true]);
    let t = first(run("Transpose", 13, vec![], vec![Some(x.clone())]));
    assert_eq!((t.dtype(), t.to_i64_vec()), (DataType::Bool, vec![1, 0, 0, 1]));
    let tiled = first(run("Tile", 13, vec![], vec![Some(x.clone()), Some(i64s(&[2], &[1, 2]))]));
    assert_eq!(tiled.to_i64_vec(), vec![1, 0, 1, 0, 0, 1, 0, 1]);
    let pads = i64s(&[4], &[0, 1, 0, 1]);
    let p =
        first(run("Pad", 19, vec![("mode", Attribute::String(b"wrap".to_vec()))], vec![Some(x.clone()), Some(pads)]));
    assert_eq!((p.dtype(), p.shape(), p.to_i64_vec()), (DataType::Bool, vec![2, 4], vec![0, 1, 0, 1, 1, 0, 1, 0]));
    let g = first(run("Gather", 13, vec![("axis", Attribute::Int(1))], vec![Some(x.clone()), Some(i64s(&[], &[-1]))]));
    assert_eq!((g.shape(), g.to_i64_vec()), (vec![2], vec![0, 1]));
    let s = first(run(
        "ScatterElements",
        16,
        vec![],
        vec![Some(x), Some(i64s(&[1, 2], &[1, 0])), Some(bools(&[1, 2], &[false, true]))],
    ));
    assert_eq!(
        (s.dtype(), s.to_i64_vec()),
        (DataType::Bool, vec![true, true, false, true].into_iter().map(i64::from).collect())
    );
}

#[test]
fn integer_scatter_reductions() {
    let data = i64s(&[4], &[1, 2, 3, 4]);
    let idx = i64s(&[3, 1], &[0, 0, 3]);
    let upd = i64s(&[3], &[5, 6, 7]);
    let cases = [
        ("mul", vec![30, 2, 3, 28]),
        ("max", vec![6, 2, 3, 7]),
        ("min", vec![1, 2, 3, 4]),
        ("add", vec![12, 2, 3, 11]),
    ];
    for (red, want) in cases {
        let attrs = vec![("reduction", Attribute::String(red.as_bytes().to_vec()))];
        let y = first(run("ScatterND", 18, attrs, vec![Some(data.clone()), Some(idx.clone()), Some(upd.clone())]));
        assert_eq!(y.to_i64_vec(), want, "{red}");
    }
}

#[test]
fn gather_elements_with_smaller_indices() {
    let x = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let y = first(run(
        "GatherElements",
        13,
        vec![("axis", Attribute::Int(0))],
        vec![Some(x), Some(i64s(&[1, 2], &[1, -2]))],
    ));
    assert_eq!((y.shape(), y.to_i64_vec()), (vec![1, 2], vec![4, 2]));
}

#[test]
fn range_and_shape_are_int64() {
    let r =
        first(run("Range", 11, vec![], vec![Some(i64s(&[], &[10])), Some(i64s(&[], &[1])), Some(i64s(&[], &[-3]))]));
    assert_eq!((r.dtype(), r.to_i64_vec()), (DataType::Int64, vec![10, 7, 4]));
    let s = first(run("Shape", 15, vec![("start", Attribute::Int(-2))], vec![Some(bools(&[2, 3, 4], &[false; 24]))]));
    assert_eq!((s.dtype(), s.to_i64_vec()), (DataType::Int64, vec![3, 4]));
    let n = first(run("NonZero", 13, vec![], vec![Some(bools(&[2, 2], &[false, true, true, true]))]));
    assert_eq!((n.dtype(), n.shape(), n.to_i64_vec()), (DataType::Int64, vec![2, 3], vec![0, 1, 1, 1, 0, 1]));
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let x = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    assert!(run("Reshape", 14, vec![], vec![Some(x.clone()), Some(i64s(&[2], &[4, -1]))]).is_err());
    assert!(run("Reshape", 14, vec![], vec![Some(x.clone()), Some(i64s(&[2], &[-1, -1]))]).is_err());
    assert!(run("Gather", 13, vec![], vec![Some(x.clone()), Some(i64s(&[1], &[2]))]).is_err());
    assert!(run("Gather", 13, vec![], vec![Some(i64s(&[], &[1])), Some(i64s(&[1], &[0]))]).is_err());
    assert!(run("Expand", 13, vec![], vec![Some(x.clone()), Some(i64s(&[1], &[4]))]).is_err());
    assert!(
        run("Concat", 13, vec![("axis", Attribute::Int(0))], vec![Some(x.clone()), Some(i64s(&[3], &[1, 2, 3]))])
            .is_err()
    );
    assert!(
        run(
            "Slice",
            13,
            vec![],
            vec![Some(x.clone()), Some(i64s(&[1], &[0])), Some(i64s(&[1], &[1])), None, Some(i64s(&[1], &[0]))]
        )
        .is_err()
    );
    assert!(
        run(
            "Pad",
            13,
            vec![("mode", Attribute::String(b"reflect".to_vec()))],
            vec![Some(x.clone()), Some(i64s(&[2], &[1, 1]))]
        )
        .is_err()
    );
    assert!(
        run("ScatterND", 13, vec![], vec![Some(x.clone()), Some(i64s(&[1, 1], &[5])), Some(i64s(&[1, 3], &[0, 0, 0]))])
            .is_err()
    );
    assert!(
        run("Reshape", 13, vec![], vec![Some(x.clone()), Some(Tensor::from_f32(&[1], vec![6.0], &Device::cpu()))])
            .is_err()
    );
    assert!(run("DepthToSpace", 13, vec![("blocksize", Attribute::Int(2))], vec![Some(x)]).is_err());
}

#[test]
fn empty_tensors_do_not_reach_burn() {
    let e = Tensor::from_f32(&[0, 3], vec![], &Device::cpu());
    let x = Tensor::from_f32(&[2, 3], vec![0.0; 6], &Device::cpu());
    let c = first(run("Concat", 13, vec![("axis", Attribute::Int(1))], vec![Some(e.clone()), Some(e.clone())]));
    assert_eq!(c.shape(), vec![0, 6]);
    let c = first(run("Concat", 13, vec![("axis", Attribute::Int(0))], vec![Some(e.clone()), Some(x.clone())]));
    assert_eq!(c.shape(), vec![2, 3]);
    let t = first(run("Tile", 13, vec![], vec![Some(x.clone()), Some(i64s(&[2], &[0, 2]))]));
    assert_eq!(t.shape(), vec![0, 6]);
    let g = first(run("Gather", 13, vec![], vec![Some(x.clone()), Some(i64s(&[0], &[]))]));
    assert_eq!(g.shape(), vec![0, 3]);
    let s = first(run("Slice", 13, vec![], vec![Some(x), Some(i64s(&[1], &[5])), Some(i64s(&[1], &[9]))]));
    assert_eq!(s.shape(), vec![0, 3]);
    let p = first(run("Pad", 13, vec![], vec![Some(e), Some(i64s(&[4], &[1, 0, 1, 0]))]));
    assert_eq!(p.shape(), vec![2, 3]);
}
