//! Low-precision tensors (FP8, FP4, E8M0, 4/2-bit ints), held by stand-in on every device:
//! uploads decode and downloads encode every code exactly, Cast rounds into them as ONNX does
//! (ties to even, `saturate`, E8M0 `round_mode`), Q/DQ use them, data movement keeps their type,
//! and every other operator refuses them with a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_exec::{Device, ExecError, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Attribute, DataType, Graph, Operation, TensorData};

const LOW_FLOATS: [DataType; 6] = [
    DataType::Float8E4M3FN,
    DataType::Float8E4M3FNUZ,
    DataType::Float8E5M2,
    DataType::Float8E5M2FNUZ,
    DataType::Float8E8M0,
    DataType::Float4E2M1,
];
const LOW_INTS: [DataType; 4] = [DataType::Int4, DataType::Uint4, DataType::Int2, DataType::Uint2];

fn devices() -> Vec<Device> {
    #[allow(unused_mut)]
    let mut d = vec![Device::cpu()];
    #[cfg(feature = "wgpu")]
    d.push(Device::wgpu());
    d
}

/// Runs one node on `inputs` (fed as `in0`, `in1`, …) at `opset`; returns its output or the error.
fn run(device: &Device, op: Operation, opset: i64, inputs: &[TensorData]) -> Result<Tensor, ExecError> {
    let mut g = Graph::new("g");
    let mut ins = Vec::new();
    for i in 0..inputs.len() {
        let v = g.ensure_variable(&format!("in{i}"));
        g.add_graph_input(v).unwrap();
        ins.push(Some(v));
    }
    let out = g.ensure_variable("out");
    g.add_operation(op.with_opset(opset), &ins, &[Some(out)]).unwrap();
    g.add_graph_output(out).unwrap();
    let exec = Executor::new(&g, &OpRegistry::builtin(), device, &|_| opset)?;
    let feeds = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| Ok((format!("in{i}"), Value::Tensor(Tensor::from_data(t, device)?))))
        .collect::<Result<Vec<_>, ExecError>>()?;
    let out = exec.run(feeds, &mut [])?;
    Ok(out[0].1.as_tensor().unwrap().clone())
}

fn floats(v: &[f32]) -> TensorData {
    TensorData::from_vec(vec![v.len()], v).unwrap()
}

fn cast(to: DataType) -> Operation {
    Operation::new("Cast", "cast").with_attr("to", Attribute::Int(i64::from(to.onnx_code())))
}

/// Values equal bit for bit, NaN equal to NaN.
fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits())
}

#[test]
fn every_code_uploads_and_downloads_exactly() {
    for device in devices() {
        for dt in LOW_FLOATS {
            let bits = if dt == DataType::Float4E2M1 { 4 } else { 8 };
            let codes: Vec<u8> = (0..1u32 << bits).map(|c| c as u8).collect();
            let bytes = if bits == 4 { codes.chunks(2).map(|p| p[0] | (p[1] << 4)).collect() } else { codes.clone() };
            let data = TensorData::from_packed(dt, vec![codes.len()], bytes).unwrap();
            let t = Tensor::from_data(&data, &device).unwrap();
            assert_eq!((t.dtype(), t.shape(), t.stand_in_for()), (dt, vec![codes.len()], Some(dt)));
            let want = data.to_f32_vec().unwrap();
            assert!(same(&t.to_f32_vec(), &want), "{dt} values");
            // Encoding back gives the same values; every non-NaN code is the same byte.
            let back = t.to_data().unwrap();
            assert_eq!(back.dtype(), dt);
            assert!(same(&back.to_f32_vec().unwrap(), &want), "{dt} round trip");
            let nan_free: Vec<bool> = want.iter().map(|v| !v.is_nan()).collect();
            let again = TensorData::from_f32_codes(dt, vec![codes.len()], &back.to_f32_vec().unwrap()).unwrap();
            assert_eq!(back, again, "{dt}");
            if bits == 8 {
                let got = back.packed().unwrap();
                assert!(codes.iter().zip(got).zip(&nan_free).all(|((c, g), ok)| !ok || c == g), "{dt} codes");
            }
        }
        for dt in LOW_INTS {
            let (lo, hi) = match dt {
                DataType::Int4 => (-8, 7),
                DataType::Uint4 => (0, 15),
                DataType::Int2 => (-2, 1),
                _ => (0, 3),
            };
            let values: Vec<i64> = (lo..=hi).collect();
            let data = TensorData::from_i64_sub_byte(dt, vec![values.len()], &values).unwrap();
            let t = Tensor::from_data(&data, &device).unwrap();
            assert_eq!(t.dtype(), dt);
            assert_eq!(t.to_i64_vec(), values, "{dt}");
            assert_eq!(t.to_data().unwrap(), data, "{dt}");
        }
        // A scalar keeps rank 0.
        let s =
            Tensor::from_data(&TensorData::from_packed(DataType::Float8E4M3FN, vec![], vec![0x38]).unwrap(), &device)
                .unwrap();
        assert_eq!((s.shape(), s.to_f32_vec()), (vec![], vec![1.0]));
    }
}

#[test]
fn cast_into_fp8_rounds_to_nearest_even_and_saturates_by_attribute() {
    let x = floats(&[0.478_925_47, 17.0, 19.0, 1e6, f32::INFINITY, -f32::INFINITY, f32::NAN, -1e-7, 464.0]);
    for device in devices() {
        let y = run(&device, cast(DataType::Float8E4M3FN), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.dtype(), DataType::Float8E4M3FN);
        assert!(same(&y.to_f32_vec(), &[0.468_75, 16.0, 20.0, 448.0, 448.0, -448.0, f32::NAN, -0.0, 448.0]));
        let op = cast(DataType::Float8E4M3FN).with_attr("saturate", Attribute::Int(0));
        let y = run(&device, op, 25, std::slice::from_ref(&x)).unwrap();
        assert!(same(&y.to_f32_vec(), &[0.468_75, 16.0, 20.0, f32::NAN, f32::NAN, f32::NAN, f32::NAN, -0.0, 448.0]));
        let op = cast(DataType::Float8E5M2).with_attr("saturate", Attribute::Int(0));
        let y = run(&device, op, 25, std::slice::from_ref(&x)).unwrap();
        assert!(same(&y.to_f32_vec()[3..6], &[f32::INFINITY, f32::INFINITY, f32::NEG_INFINITY]));
        // FNUZ: no −0, NaN instead of infinities.
        let op = cast(DataType::Float8E4M3FNUZ).with_attr("saturate", Attribute::Int(0));
        let y = run(&device, op, 25, std::slice::from_ref(&x)).unwrap();
        let v = y.to_f32_vec();
        assert!(v[3].is_nan() && v[4].is_nan() && v[5].is_nan());
        assert_eq!(v[7].to_bits(), 0, "+0, not -0");
        assert_eq!(y.to_data().unwrap().packed().unwrap()[7], 0x00);
        // Before opset 19 there is no `saturate`: always saturating.
        let y = run(&device, cast(DataType::Float8E5M2), 17, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.to_f32_vec()[3], 57344.0);
        // And back to float16 exactly.
        let y = run(
            &device,
            cast(DataType::Float16),
            25,
            &[TensorData::from_packed(DataType::Float8E5M2, vec![2], vec![0x7B, 0xFC]).unwrap()],
        )
        .unwrap();
        assert_eq!((y.dtype(), y.to_f32_vec()), (DataType::Float16, vec![57344.0, f32::NEG_INFINITY]));
    }
}

#[test]
fn cast_into_fp4_and_e8m0() {
    for device in devices() {
        let y = run(&device, cast(DataType::Float4E2M1), 25, &[floats(&[0.25, 0.75, 5.0, -9.0, f32::INFINITY, 1.05])])
            .unwrap();
        assert_eq!(y.dtype(), DataType::Float4E2M1);
        assert_eq!(y.to_f32_vec(), vec![0.0, 1.0, 4.0, -6.0, 6.0, 1.0]);
        assert_eq!(y.to_data().unwrap().packed().unwrap(), &[0x20, 0xF6, 0x27]);
        let x = floats(&[0.0, 0.124, 1.1, 1.5, 3.0]);
        for (mode, want) in [
            ("up", [2f32.powi(-127), 0.125, 2.0, 2.0, 4.0]),
            ("down", [2f32.powi(-127), 0.0625, 1.0, 1.0, 2.0]),
            ("nearest", [2f32.powi(-127), 0.125, 1.0, 2.0, 4.0]),
        ] {
            let op = cast(DataType::Float8E8M0).with_attr("round_mode", Attribute::String(mode.as_bytes().to_vec()));
            let y = run(&device, op, 25, std::slice::from_ref(&x)).unwrap();
            assert_eq!(y.to_f32_vec(), want, "{mode}");
        }
        let op = cast(DataType::Float8E8M0).with_attr("round_mode", Attribute::String(b"odd".to_vec()));
        assert!(matches!(run(&device, op, 25, std::slice::from_ref(&x)), Err(ExecError::Op { .. })));
    }
}

#[test]
fn cast_into_sub_byte_ints_wraps_and_sign_extends() {
    for device in devices() {
        let x = floats(&[-9.0, -8.0, 7.0, 8.0, 15.0, 2.7, -2.7]);
        let y = run(&device, cast(DataType::Int4), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!((y.dtype(), y.to_i64_vec()), (DataType::Int4, vec![7, -8, 7, -8, -1, 2, -2]));
        let y = run(&device, cast(DataType::Uint4), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.to_i64_vec(), vec![7, 8, 7, 8, 15, 2, 14]);
        let y = run(&device, cast(DataType::Int2), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.to_i64_vec(), vec![-1, 0, -1, 0, -1, -2, -2]);
        let y = run(&device, cast(DataType::Uint2), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.to_i64_vec(), vec![3, 0, 3, 0, 3, 2, 2]);
        // int4 → int8 keeps the sign; packed int4 → int64 too.
        let int4 = TensorData::from_packed(DataType::Int4, vec![3], vec![0x87, 0x0F]).unwrap();
        let y = run(&device, cast(DataType::Int8), 25, std::slice::from_ref(&int4)).unwrap();
        assert_eq!((y.dtype(), y.to_i64_vec()), (DataType::Int8, vec![7, -8, -1]));
        let y = run(&device, cast(DataType::Uint4), 25, &[int4]).unwrap();
        assert_eq!(y.to_data().unwrap().packed().unwrap(), &[0x87, 0x0F]);
    }
}

#[test]
fn quantize_and_dequantize_low_precision_types() {
    for device in devices() {
        let q = Operation::new("QuantizeLinear", "q").with_attr("axis", Attribute::Int(0));
        let x = TensorData::from_vec(vec![3, 2], &[0.0f32, 2.5, -30.0, 9.0, 40.0, -0.4]).unwrap();
        let scale = floats(&[2.0, 3.0, 4.0]);
        let zp = TensorData::from_i64_sub_byte(DataType::Int4, vec![3], &[1, 1, 1]).unwrap();
        let y = run(&device, q.clone(), 25, &[x.clone(), scale.clone(), zp]).unwrap();
        // round(x / s) + 1, clamped to [-8, 7]: 0/2 → 1, 2.5/2 = 1.25 → 2, -30/3 → -9 → -8, 9/3 → 4, 40/4 → 7, -0.1 → 1.
        assert_eq!((y.dtype(), y.to_i64_vec()), (DataType::Int4, vec![1, 2, -8, 4, 7, 1]));
        let zp = TensorData::from_f32_codes(DataType::Float8E4M3FN, vec![3], &[0.0; 3]).unwrap();
        let y = run(&device, q.clone(), 25, &[x.clone(), scale.clone(), zp.clone()]).unwrap();
        assert_eq!(y.dtype(), DataType::Float8E4M3FN);
        assert_eq!(y.to_f32_vec(), vec![0.0, 1.25, -10.0, 3.0, 10.0, -0.1015625]);
        // Saturation by attribute: 1e6 / 2 overflows E4M3FN.
        let big = TensorData::from_vec(vec![3, 1], &[1e6f32, 0.0, 0.0]).unwrap();
        let y = run(&device, q.clone(), 25, &[big.clone(), scale.clone(), zp.clone()]).unwrap();
        assert_eq!(y.to_f32_vec()[0], 448.0);
        let y = run(&device, q.with_attr("saturate", Attribute::Int(0)), 25, &[big, scale.clone(), zp]).unwrap();
        assert!(y.to_f32_vec()[0].is_nan());

        let dq = Operation::new("DequantizeLinear", "dq").with_attr("axis", Attribute::Int(0));
        let x = TensorData::from_f32_codes(DataType::Float4E2M1, vec![3], &[1.5, -4.0, 6.0]).unwrap();
        let zp = TensorData::from_f32_codes(DataType::Float4E2M1, vec![3], &[0.0, 0.0, 1.0]).unwrap();
        let y = run(&device, dq.clone(), 25, &[x, scale.clone(), zp]).unwrap();
        assert_eq!((y.dtype(), y.to_f32_vec()), (DataType::Float, vec![3.0, -12.0, 20.0]));
        let x = TensorData::from_i64_sub_byte(DataType::Uint2, vec![3], &[0, 3, 2]).unwrap();
        let zp = TensorData::from_i64_sub_byte(DataType::Uint2, vec![3], &[1, 1, 1]).unwrap();
        let y = run(&device, dq, 25, &[x, scale, zp]).unwrap();
        assert_eq!(y.to_f32_vec(), vec![-2.0, 6.0, 4.0]);
    }
}

#[test]
fn data_movement_keeps_the_type_and_arithmetic_is_refused() {
    for device in devices() {
        let x = TensorData::from_f32_codes(DataType::Float8E5M2, vec![2, 2], &[1.0, -2.0, 0.5, 57344.0]).unwrap();
        let shape = TensorData::from_vec(vec![1], &[4i64]).unwrap();
        let y = run(&device, Operation::new("Reshape", "r"), 25, &[x.clone(), shape]).unwrap();
        assert_eq!((y.dtype(), y.shape()), (DataType::Float8E5M2, vec![4]));
        assert_eq!(y.to_data().unwrap().packed(), x.packed());
        let y = run(&device, Operation::new("Transpose", "t"), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!((y.dtype(), y.to_f32_vec()), (DataType::Float8E5M2, vec![1.0, 0.5, -2.0, 57344.0]));
        let y = run(&device, Operation::new("Identity", "i"), 25, std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.to_data().unwrap(), x);
        // Add is not defined on FP8 (nor is any arithmetic here): a typed error, not F32 math.
        let err = run(&device, Operation::new("Add", "add"), 25, &[x.clone(), x.clone()]).unwrap_err();
        assert!(matches!(&err, ExecError::NotImplemented { feature, .. } if feature.contains("float8e5m2")), "{err}");
        let i4 = TensorData::from_i64_sub_byte(DataType::Int4, vec![2], &[3, -4]).unwrap();
        let err = run(&device, Operation::new("Neg", "neg"), 25, &[i4]).unwrap_err();
        assert!(matches!(err, ExecError::NotImplemented { .. }), "{err}");
    }
}
