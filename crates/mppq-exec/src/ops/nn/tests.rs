//! Focused tests for behaviour the ONNX backend suite does not cover: opset-18 GroupNormalization,
//! 3-d MaxPool with ceil_mode, 1-d Conv with SAME_LOWER, legacy Upsample/Resize-10, Gemm and
//! MatMul corner cases, opset-dependent Softmax, bidirectional RNN with sequence_lens, and
//! errors (not panics) on bad inputs.

use crate::{Device, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Attribute, Graph, Operation};

/// Runs one operator on `inputs` and returns its `n_out` outputs (or the error).
fn run(op: Operation, inputs: Vec<Tensor>, n_out: usize) -> crate::Result<Vec<Tensor>> {
    let mut g = Graph::new("t");
    let mut ins = Vec::new();
    for i in 0..inputs.len() {
        let v = g.ensure_variable(&format!("in{i}"));
        g.add_graph_input(v)?;
        ins.push(Some(v));
    }
    let outs: Vec<_> = (0..n_out).map(|i| g.ensure_variable(&format!("out{i}"))).collect();
    for &o in &outs {
        g.add_graph_output(o)?;
    }
    let opset = op.opset;
    g.add_operation(op, &ins, &outs.iter().map(|&o| Some(o)).collect::<Vec<_>>())?;
    let device = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| opset)?;
    let feeds = inputs.into_iter().enumerate().map(|(i, t)| (format!("in{i}"), Value::Tensor(t))).collect();
    let out = exec.run(feeds, &mut [])?;
    Ok(out.into_iter().filter_map(|(_, v)| v.into_tensor()).collect())
}

fn f32s(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape, v, &Device::cpu())
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "lengths differ: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

fn ints(name: &str, v: &[i64]) -> (String, Attribute) {
    (name.to_string(), Attribute::Ints(v.to_vec()))
}

fn op(op_type: &str, opset: i64, attrs: Vec<(String, Attribute)>) -> Operation {
    attrs.into_iter().fold(Operation::new(op_type, op_type).with_opset(opset), |o, (k, v)| o.with_attr(k, v))
}

#[test]
fn group_norm_opset18_scales_per_group_and_opset21_per_channel() {
    let x: Vec<f32> = vec![1., 2., 3., 5., 0., 4., 8., 8.];
    // Groups: channels {0,1} = [1,2,3,5], {2,3} = [0,4,8,8].
    let norm = |v: &[f32]| {
        let m = v.iter().sum::<f32>() / v.len() as f32;
        let var = v.iter().map(|a| (a - m) * (a - m)).sum::<f32>() / v.len() as f32;
        v.iter().map(|a| (a - m) / (var + 1e-5).sqrt()).collect::<Vec<_>>()
    };
    let (g0, g1) = (norm(&x[..4]), norm(&x[4..]));
    let attrs = || vec![("num_groups".to_string(), Attribute::Int(2))];
    let y18 = run(
        op("GroupNormalization", 18, attrs()),
        vec![f32s(&[1, 4, 2], x.clone()), f32s(&[2], vec![2., 3.]), f32s(&[2], vec![1., -1.])],
        1,
    )
    .unwrap();
    let want18: Vec<f32> = g0.iter().map(|v| v * 2. + 1.).chain(g1.iter().map(|v| v * 3. - 1.)).collect();
    close(&y18[0].to_f32_vec(), &want18);
    let y21 = run(
        op("GroupNormalization", 21, attrs()),
        vec![f32s(&[1, 4, 2], x), f32s(&[4], vec![1., 2., 3., 4.]), f32s(&[4], vec![0.; 4])],
        1,
    )
    .unwrap();
    let all: Vec<f32> = g0.iter().chain(&g1).copied().collect();
    let want21: Vec<f32> = all.iter().enumerate().map(|(i, v)| v * (i / 2 + 1) as f32).collect();
    close(&y21[0].to_f32_vec(), &want21);
}

#[test]
fn max_pool_3d_ceil_matches_naive() {
    let (d, h, w) = (5usize, 4usize, 5usize);
    let x: Vec<f32> = (0..d * h * w).map(|i| ((i * 37) % 23) as f32 - 11.0).collect();
    let attrs = vec![
        ints("kernel_shape", &[2, 2, 3]),
        ints("strides", &[2, 2, 2]),
        ints("pads", &[0, 1, 0, 0, 0, 1]),
        ("ceil_mode".to_string(), Attribute::Int(1)),
    ];
    let y = run(op("MaxPool", 12, attrs), vec![f32s(&[1, 1, d, h, w], x.clone())], 1).unwrap();
    // Naive: output sizes with ceil, last window must start inside input + begin pad.
    let size = |n: usize, k: usize, s: usize, pb: usize, pe: usize| {
        let mut o = (n + pb + pe - k).div_ceil(s) + 1;
        if (o - 1) * s >= n + pb {
            o -= 1;
        }
        o
    };
    let (od, oh, ow) = (size(d, 2, 2, 0, 0), size(h, 2, 2, 1, 0), size(w, 3, 2, 0, 1));
    assert_eq!(y[0].shape(), vec![1, 1, od, oh, ow]);
    let mut want = Vec::new();
    for a in 0..od {
        for b in 0..oh {
            for c in 0..ow {
                let mut m = f32::NEG_INFINITY;
                for i in 0..2 {
                    for j in 0..2 {
                        for k in 0..3 {
                            let (z, yy, xx) = ((a * 2 + i) as i64, (b * 2 + j) as i64 - 1, (c * 2 + k) as i64);
                            if z < d as i64 && yy >= 0 && yy < h as i64 && xx < w as i64 {
                                m = m.max(x[(z as usize * h + yy as usize) * w + xx as usize]);
                            }
                        }
                    }
                }
                want.push(m);
            }
        }
    }
    close(&y[0].to_f32_vec(), &want);
}

#[test]
fn max_pool_1d_indices_are_flat_int64() {
    let x = f32s(&[1, 2, 4], vec![1., 3., 2., 0., 5., 4., 7., 6.]);
    let y = run(op("MaxPool", 12, vec![ints("kernel_shape", &[2]), ints("strides", &[2])]), vec![x], 2).unwrap();
    close(&y[0].to_f32_vec(), &[3., 2., 5., 7.]);
    assert_eq!(y[1].dtype(), mppq_ir::DataType::Int64);
    assert_eq!(y[1].to_i64_vec(), vec![1, 2, 4, 6]);
}

#[test]
fn conv_1d_same_lower_stride_2() {
    let x: Vec<f32> = (0..7).map(|i| i as f32).collect();
    let attrs = vec![("auto_pad".to_string(), Attribute::String(b"SAME_LOWER".to_vec())), ints("strides", &[2])];
    let y = run(op("Conv", 11, attrs), vec![f32s(&[1, 1, 7], x.clone()), f32s(&[1, 1, 3], vec![1., 10., 100.])], 1)
        .unwrap();
    // out = ceil(7/2) = 4, total pad = (4-1)*2+3-7 = 2, SAME_LOWER: begin 1, end 1.
    let px = |i: i64| if (0..7).contains(&i) { x[i as usize] } else { 0.0 };
    let want: Vec<f32> =
        (0..4).map(|o| (0..3).map(|k| px(o * 2 + k - 1) * [1., 10., 100.][k as usize]).sum()).collect();
    close(&y[0].to_f32_vec(), &want);
}

#[test]
fn legacy_upsample_and_resize10_use_asymmetric_floor() {
    let x = f32s(&[1, 1, 1, 3], vec![1., 2., 3.]);
    let up = op("Upsample", 7, vec![("scales".to_string(), Attribute::Floats(vec![1., 1., 1., 2.]))]);
    close(&run(up, vec![x.clone()], 1).unwrap()[0].to_f32_vec(), &[1., 1., 2., 2., 3., 3.]);
    let r10 = op("Resize", 10, vec![("mode".to_string(), Attribute::String(b"linear".to_vec()))]);
    let y = run(r10, vec![x, f32s(&[4], vec![1., 1., 1., 2.])], 1).unwrap();
    close(&y[0].to_f32_vec(), &[1., 1.5, 2., 2.5, 3., 3.]);
}

/// A Resize whose output is empty plans no interpolation along its other axes, however long they
/// are (a fuzzed model took minutes and gigabytes planning 880 million taps for nothing).
#[test]
fn resize_to_an_empty_output_plans_nothing() {
    let x = f32s(&[1, 8, 1, 8], vec![0.5; 64]);
    let r = op("Resize", 11, vec![("mode".to_string(), Attribute::String(b"linear".to_vec()))]);
    let started = std::time::Instant::now();
    let y = run(r, vec![x, f32s(&[0], vec![]), f32s(&[4], vec![1.0, 1e-38, 8.8e8, 2.0])], 1).unwrap();
    assert_eq!(y[0].shape(), vec![1, 0, 880_000_000, 16]);
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn gemm_without_c_and_with_row_c() {
    let a = f32s(&[2, 2], vec![1., 2., 3., 4.]);
    let b = f32s(&[2, 2], vec![1., 0., 0., 1.]);
    let g =
        op("Gemm", 13, vec![("alpha".to_string(), Attribute::Float(2.0)), ("transA".to_string(), Attribute::Int(1))]);
    close(&run(g, vec![a.clone(), b.clone()], 1).unwrap()[0].to_f32_vec(), &[2., 6., 4., 8.]);
    let g = op("Gemm", 13, vec![("beta".to_string(), Attribute::Float(0.5))]);
    close(&run(g, vec![a, b, f32s(&[2], vec![10., 20.])], 1).unwrap()[0].to_f32_vec(), &[6., 12., 8., 14.]);
}

#[test]
fn matmul_vectors_and_integers() {
    let v = f32s(&[3], vec![1., 2., 3.]);
    let y = run(op("MatMul", 13, vec![]), vec![v.clone(), v], 1).unwrap();
    assert_eq!(y[0].shape(), Vec::<usize>::new());
    close(&y[0].to_f32_vec(), &[14.]);
    let dev = Device::cpu();
    let a = Tensor::from_i64(&[2, 2], vec![1, 2, 3, 4], &dev);
    let b = Tensor::from_i64(&[2], vec![5, 6], &dev);
    let y = run(op("MatMul", 13, vec![]), vec![a, b], 1).unwrap();
    assert_eq!(y[0].to_i64_vec(), vec![17, 39]);
}

#[test]
fn softmax_before_13_flattens_at_axis() {
    let x = f32s(&[2, 2], vec![0., 0., 0., 0.]);
    let y11 = run(op("Softmax", 11, vec![("axis".to_string(), Attribute::Int(0))]), vec![x.clone()], 1).unwrap();
    close(&y11[0].to_f32_vec(), &[0.25; 4]);
    let y13 = run(op("Softmax", 13, vec![("axis".to_string(), Attribute::Int(0))]), vec![x], 1).unwrap();
    close(&y13[0].to_f32_vec(), &[0.5; 4]);
}

/// An error reported by the operator's own checks, not a caught backend panic.
fn clean_err(r: crate::Result<Vec<Tensor>>) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(crate::ExecError::Backend { message, .. }) => panic!("backend panic: {message}"),
        Err(_) => {}
    }
}

#[test]
fn bad_inputs_are_errors() {
    // Conv channel mismatch.
    let e = run(op("Conv", 11, vec![]), vec![f32s(&[1, 2, 3, 3], vec![0.; 18]), f32s(&[1, 3, 1, 1], vec![0.; 3])], 1);
    clean_err(e);
    // Absurd Resize scales.
    let e = run(
        op("Resize", 13, vec![]),
        vec![f32s(&[1, 1, 2, 2], vec![0.; 4]), f32s(&[0], vec![]), f32s(&[4], vec![1., 1., 1e12, 1e12])],
        1,
    );
    clean_err(e);
    // Pool window larger than the padded input.
    let e = run(op("AveragePool", 11, vec![ints("kernel_shape", &[5, 5])]), vec![f32s(&[1, 1, 2, 2], vec![0.; 4])], 1);
    clean_err(e);
    // Einsum equation that repeats an output label.
    let e = run(
        op("Einsum", 12, vec![("equation".to_string(), Attribute::String(b"ij->ii".to_vec()))]),
        vec![f32s(&[2, 2], vec![0.; 4])],
        1,
    );
    clean_err(e);
    // MatMul inner mismatch.
    let e = run(op("MatMul", 13, vec![]), vec![f32s(&[2, 3], vec![0.; 6]), f32s(&[2, 3], vec![0.; 6])], 1);
    clean_err(e);
}

#[test]
fn bidirectional_rnn_with_sequence_lens_matches_naive() {
    // T = 3, B = 2, input 1, hidden 1; W = 1, R = 0.5, tanh; lengths 3 and 2.
    let xs = [[0.5f32, -1.0], [1.0, 2.0], [-0.5, 9.0]]; // [t][b]; x[2][1] is past its length
    let x = f32s(&[3, 2, 1], xs.iter().flatten().copied().collect());
    let w = f32s(&[2, 1, 1], vec![1.0, 1.0]);
    let r = f32s(&[2, 1, 1], vec![0.5, 0.5]);
    let dev = Device::cpu();
    let lens = Tensor::from_i64(&[2], vec![3, 2], &dev);
    let mut g = op("RNN", 14, vec![("direction".to_string(), Attribute::String(b"bidirectional".to_vec()))]);
    g = g.with_attr("hidden_size", Attribute::Int(1));
    let out = run(g, vec![x, w, r, f32s(&[2, 2], vec![0.0; 4]), lens], 2).unwrap();
    let len = [3usize, 2];
    let mut want_y = vec![0f32; 3 * 2 * 2]; // [t][dir][b]
    let mut want_h = vec![0f32; 2 * 2]; // [dir][b]
    for b in 0..2 {
        let mut h = 0f32;
        for t in 0..len[b] {
            h = (xs[t][b] + 0.5 * h).tanh();
            want_y[(t * 2) * 2 + b] = h;
        }
        want_h[b] = h;
        let mut h = 0f32;
        for t in (0..len[b]).rev() {
            h = (xs[t][b] + 0.5 * h).tanh();
            want_y[(t * 2 + 1) * 2 + b] = h;
        }
        want_h[2 + b] = h;
    }
    assert_eq!(out[0].shape(), vec![3, 2, 2, 1]);
    close(&out[0].to_f32_vec(), &want_y);
    close(&out[1].to_f32_vec(), &want_h);
}
