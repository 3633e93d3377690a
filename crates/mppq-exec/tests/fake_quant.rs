//! Fake-quant kernels against references: an exact scalar linear reference (every rounding
//! policy, ties, negatives, saturation, per-channel on axes 0 and 1), exhaustive FP8 round
//! trips with a brute-force nearest-value reference, ONNX QuantizeLinear→DequantizeLinear run
//! by the executor, and input fake-quant in plain forward.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_exec::simulation::fake_quant::{FloatFormat, KernelPath, fake_quant_with, is_power_of_two};
use mppq_exec::{
    BurnFakeQuant, Device, ExecError, Executor, FakeQuantizer, OpRegistry, QuantSimulation, Tensor, Value,
};
use mppq_ir::quant::{
    OperationQuantConfig, QuantizationPolicy, QuantizationProperty::*, QuantizationState, RoundingPolicy,
    TensorQuantConfig,
};
use mppq_ir::{Attribute, Graph, IrError, Operation, TensorData};

const PATHS: [KernelPath; 2] = [KernelPath::Auto, KernelPath::Chained];

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Rounding written independently of `RoundingPolicy::round` (floor + exact fraction).
fn ref_round(p: RoundingPolicy, v: f64) -> f64 {
    use RoundingPolicy::*;
    let t = v.floor();
    let f = v - t;
    let tie_up = match p {
        HalfEven => t % 2.0 != 0.0,
        HalfUp => true,
        HalfDown => false,
        HalfTowardsZero => v < 0.0,
        HalfAwayFromZero => v > 0.0,
        Ceil => return v.ceil(),
        Floor => return t,
    };
    if f > 0.5 || (f == 0.5 && tie_up) { t + 1.0 } else { t }
}

/// The linear contract: v = x/s in f32, q = clamp(round(v) + o), y = f32(q - o) * s.
fn ref_linear(x: f32, s: f32, o: f32, qmin: i64, qmax: i64, p: RoundingPolicy) -> f32 {
    let v = x / s;
    if v.is_nan() {
        return v;
    }
    let r = p.round(f64::from(v));
    if v.is_finite() {
        assert_eq!(r, ref_round(p, f64::from(v)), "{p:?}({v})");
    }
    let q = (r + f64::from(o)).clamp(qmin as f64, qmax as f64);
    ((q - f64::from(o)) as f32) * s
}

/// Same float, ±0 equal, NaN equal to NaN.
fn same(a: f32, b: f32) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn assert_all_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let bad: Vec<_> = got.iter().zip(want).enumerate().filter(|(_, (g, w))| !same(**g, **w)).take(5).collect();
    assert!(
        bad.is_empty(),
        "{what}: {} mismatches, first (index, (got, want)): {bad:?}",
        got.iter().zip(want).filter(|(g, w)| !same(**g, **w)).count()
    );
}

fn linear_config(
    bits: u32,
    symmetric: bool,
    axis: Option<usize>,
    scale: Vec<f32>,
    offset: Vec<f32>,
    p: RoundingPolicy,
) -> TensorQuantConfig {
    let mut c = TensorQuantConfig::linear(bits, symmetric, axis).unwrap();
    c.scale = scale;
    c.offset = offset;
    c.rounding = p;
    c.state = QuantizationState::Activated;
    c
}

/// Values around and beyond the range of `scale`/`offset`: exact ties, near-ties, negatives,
/// saturation, zeros, infinities and NaN.
fn values(rng: &mut Rng, n: usize, s: f32, span: f32) -> Vec<f32> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let k = rng.below(2 * span as u64 + 1) as f32 - span;
        let x = match i % 8 {
            0 | 1 => (k + 0.5) * s,    // ties (exact when s is a power of two)
            2 => k * s,                // on the grid
            3 => (k + rng.unit()) * s, // anywhere
            4 => f32::from_bits(((k + 0.5) * s).to_bits().wrapping_add(if rng.below(2) == 0 { 1 } else { u32::MAX })), // 1 ulp off a tie
            5 => (rng.unit() - 0.5) * 8.0 * span * s, // well out of range
            6 => (k + 0.5) * s * 1.0001,
            _ => [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30, -1e30, f32::MIN_POSITIVE]
                [rng.below(8) as usize],
        };
        v.push(x);
    }
    v
}

fn run(path: KernelPath, shape: &[usize], x: &[f32], c: &TensorQuantConfig) -> Vec<f32> {
    let d = Device::cpu();
    let t = Tensor::from_f32(shape, x.to_vec(), &d);
    fake_quant_with(t, c, path).unwrap().to_f32_vec()
}

#[test]
fn linear_per_tensor_every_policy_matches_scalar_reference() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    // (bits, symmetric, scale, offset): uint8 asymmetric, int8 symmetric, 4-bit, a non-power-of-2 scale.
    let cases = [
        (8, false, 0.25f32, 128.0f32),
        (8, true, 0.5, 0.0),
        (4, false, 0.125, 3.0),
        (8, true, 0.1, 0.0),
        (8, false, 0.037, 17.0),
    ];
    for p in RoundingPolicy::ALL {
        for &(bits, sym, s, o) in &cases {
            let c = linear_config(bits, sym, None, vec![s], vec![o], p);
            let x = values(&mut rng, 4096, s, 300.0);
            let want: Vec<f32> = x.iter().map(|&x| ref_linear(x, s, o, c.quant_min, c.quant_max, p)).collect();
            for path in PATHS {
                assert_all_same(
                    &run(path, &[x.len()], &x, &c),
                    &want,
                    &format!("{p:?} {bits}b sym={sym} s={s} o={o} {path:?}"),
                );
                checked += x.len();
            }
        }
    }
    assert!(checked >= 100_000, "{checked}");
}

#[test]
fn linear_per_channel_axis_0_and_1_of_4d() {
    let mut rng = Rng(42);
    let shape = [6usize, 5, 9, 11];
    let n: usize = shape.iter().product();
    let mut checked = 0;
    for axis in [0usize, 1] {
        let c_count = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        for p in RoundingPolicy::ALL {
            for sym in [true, false] {
                let scale: Vec<f32> = (0..c_count).map(|i| [0.5f32, 0.25, 0.03125, 0.1, 0.07][i % 5]).collect();
                let offset: Vec<f32> = (0..c_count).map(|i| if sym { 0.0 } else { (i * 37 % 256) as f32 }).collect();
                let c = linear_config(8, sym, Some(axis), scale.clone(), offset.clone(), p);
                let mut x = Vec::with_capacity(n);
                let mut want = Vec::with_capacity(n);
                for i in 0..n {
                    let ch = (i / inner) % c_count;
                    let v = values(&mut rng, 1, scale[ch], 200.0)[0];
                    x.push(v);
                    want.push(ref_linear(v, scale[ch], offset[ch], c.quant_min, c.quant_max, p));
                }
                for path in PATHS {
                    assert_all_same(
                        &run(path, &shape, &x, &c),
                        &want,
                        &format!("axis {axis} {p:?} sym={sym} {path:?}"),
                    );
                    checked += n;
                }
            }
        }
    }
    assert!(checked >= 100_000, "{checked}");
}

#[test]
fn linear_32_bit_bias_range_uses_exact_rounding() {
    let mut rng = Rng(7);
    for p in RoundingPolicy::ALL {
        let c = linear_config(32, true, None, vec![1.0 / 1024.0], vec![0.0], p);
        let x: Vec<f32> = (0..4096)
            .map(|i| match i % 4 {
                0 => (rng.below(1 << 30) as f32 + 0.5) / 1024.0 * if i % 8 == 0 { -1.0 } else { 1.0 },
                1 => (rng.below(1 << 22) as f32 + 0.5) * 2.0f32.powi(-10), // ties of magnitude ~2^22
                2 => 3e6 + 0.5 / 1024.0 * (i as f32),
                _ => [1e10, -1e10, f32::INFINITY][i % 3],
            })
            .collect();
        let want: Vec<f32> = x.iter().map(|&v| ref_linear(v, c.scale[0], 0.0, c.quant_min, c.quant_max, p)).collect();
        assert_all_same(&run(KernelPath::Auto, &[x.len()], &x, &c), &want, &format!("32-bit {p:?}"));
    }
}

#[test]
fn fused_kernel_handles_strided_and_shared_buffers() {
    let d = Device::cpu();
    let c = linear_config(8, true, Some(1), vec![0.5, 0.25], vec![0.0, 0.0], RoundingPolicy::HalfEven);
    // A transposed (strided) view: [3,2] from a [2,3] tensor.
    let base = Tensor::from_f32(&[2, 3], vec![0.3, 0.75, -1.25, 100.0, 0.124, -0.37], &d);
    let t = base.clone().permute(&[1, 0]);
    let y = mppq_exec::fake_quant_tensor(t, &c).unwrap();
    // rows of the view: [0.3, 100], [0.75, 0.124], [-1.25, -0.37]; column 0 scale 0.5, column 1 0.25
    assert_eq!(y.to_f32_vec(), vec![0.5, 31.75, 1.0, 0.0, -1.0, -0.25]);
    // The shared base tensor is untouched (copy-on-write).
    assert_eq!(base.to_f32_vec(), vec![0.3, 0.75, -1.25, 100.0, 0.124, -0.37]);
}

fn bad(c: &TensorQuantConfig) -> String {
    let d = Device::cpu();
    let t = Tensor::from_f32(&[2, 3], vec![0.0; 6], &d);
    match mppq_exec::fake_quant_tensor(t, c) {
        Err(e @ ExecError::Ir(IrError::InvalidQuantConfig(_))) => e.to_string(),
        other => panic!("expected InvalidQuantConfig, got {other:?}"),
    }
}

#[test]
fn invalid_configs_are_typed_errors_naming_the_problem() {
    let mut c = linear_config(8, true, None, vec![], vec![], RoundingPolicy::HalfEven);
    assert!(bad(&c).contains("no scale"), "{}", bad(&c));
    c.policy = QuantizationPolicy::new(&[PerTensor, Linear, Symmetric, PowerOf2]).unwrap();
    c.scale = vec![0.3];
    c.offset = vec![0.0];
    assert!(bad(&c).contains("power of two"), "{}", bad(&c));
    c.scale = vec![0.25];
    let d = Device::cpu();
    let y = mppq_exec::fake_quant_tensor(Tensor::from_f32(&[3], vec![0.3, -0.4, 0.125], &d), &c).unwrap();
    assert_eq!(y.to_f32_vec(), vec![0.25, -0.5, 0.0]);
    assert!(
        is_power_of_two(f32::from_bits(1)) && is_power_of_two(0.5) && !is_power_of_two(0.75) && !is_power_of_two(0.0)
    );

    let wrong_count = linear_config(8, true, Some(1), vec![0.5, 0.5], vec![0.0, 0.0], RoundingPolicy::HalfEven);
    assert!(bad(&wrong_count).contains("per-channel"), "{}", bad(&wrong_count));
    let wrong_axis = linear_config(8, true, Some(4), vec![0.5], vec![0.0], RoundingPolicy::HalfEven);
    assert!(bad(&wrong_axis).contains("axis 4"), "{}", bad(&wrong_axis));
    let frac_offset = linear_config(8, false, None, vec![0.5], vec![3.5], RoundingPolicy::HalfEven);
    assert!(bad(&frac_offset).contains("offset"), "{}", bad(&frac_offset));
    let negative_scale = linear_config(8, true, None, vec![-0.5], vec![0.0], RoundingPolicy::HalfEven);
    assert!(bad(&negative_scale).contains("scale"), "{}", bad(&negative_scale));
    let mut fp = fp_config(4, 3, 448, 1.0);
    fp.quant_max = 500;
    assert!(bad(&fp).contains("exceeds"), "{}", bad(&fp));
}

#[test]
fn non_float_values_pass_through() {
    let d = Device::cpu();
    let c = linear_config(8, true, None, vec![0.5], vec![0.0], RoundingPolicy::HalfEven);
    let ints = Tensor::from_i64(&[3], vec![1, 2, 3], &d);
    let out = BurnFakeQuant.fake_quant(Value::Tensor(ints), &c).unwrap();
    assert_eq!(out.as_tensor().unwrap().to_i64_vec(), vec![1, 2, 3]);
    // Even an uncalibrated config is fine for a value that is never quantized.
    let empty = linear_config(8, true, None, vec![], vec![], RoundingPolicy::HalfEven);
    assert!(BurnFakeQuant.fake_quant(Value::Tensor(Tensor::from_i64(&[1], vec![5], &d)), &empty).is_ok());
    let f = BurnFakeQuant.fake_quant(Value::Tensor(Tensor::from_f32(&[2], vec![0.3, 0.8], &d)), &c).unwrap();
    assert_eq!(f.as_tensor().unwrap().to_f32_vec(), vec![0.5, 1.0]);
}

// ---------------------------------------------------------------------------------------
// Floating formats.

fn fp_config(e: u32, m: u32, max: i64, scale: f32) -> TensorQuantConfig {
    let mut c = TensorQuantConfig::linear(8, true, None).unwrap();
    c.policy = QuantizationPolicy::new(&[PerTensor, Floating, Symmetric]).unwrap();
    c.exponent_bits = e;
    c.mantissa_bits = m;
    c.quant_min = -max;
    c.quant_max = max;
    c.scale = vec![scale];
    c.offset = vec![0.0];
    c.state = QuantizationState::Activated;
    c
}

/// Decodes a code of a 1+e+m bit format: E4M3 is the FN variant, others IEEE-style.
fn decode(code: u32, e: u32, m: u32) -> f32 {
    let sign = if code >> (e + m) & 1 == 1 { -1.0f64 } else { 1.0 };
    let exp = (code >> m) & ((1 << e) - 1);
    let man = code & ((1 << m) - 1);
    let bias = (1i32 << (e - 1)) - 1;
    let top = (1 << e) - 1;
    let fnv = (e, m) == (4, 3);
    if exp == top && fnv && man == (1 << m) - 1 {
        return f32::NAN;
    }
    if exp == top && !fnv {
        return if man == 0 { (sign * f64::INFINITY) as f32 } else { f32::NAN };
    }
    let frac = f64::from(man) / f64::from(1u32 << m);
    let v = if exp == 0 { frac * 2f64.powi(1 - bias) } else { (1.0 + frac) * 2f64.powi(exp as i32 - bias) };
    (sign * v) as f32
}

/// Nearest non-negative finite value by brute force; ties to the even code; saturating.
fn nearest(a: f32, table: &[(f32, u32)]) -> f32 {
    let Some(&(max, _)) = table.last() else { unreachable!() };
    if a >= max {
        return max;
    }
    let i = table.partition_point(|(v, _)| *v <= a);
    let (lo, lc) = table[i - 1];
    let (hi, _) = table[i];
    let (dl, dh) = (f64::from(a) - f64::from(lo), f64::from(hi) - f64::from(a));
    if dl < dh || (dl == dh && lc % 2 == 0) { lo } else { hi }
}

fn positive_table(e: u32, m: u32) -> Vec<(f32, u32)> {
    let mut t: Vec<(f32, u32)> = (0..1u32 << (e + m))
        .map(|c| (decode(c, e, m), c))
        .filter(|(v, _)| v.is_finite() && v.is_sign_positive())
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    t
}

#[test]
fn fp8_every_representable_value_round_trips_exactly() {
    for (e, m, max, has_inf) in [(4u32, 3u32, 448i64, false), (5, 2, 57344, true)] {
        let fmt = FloatFormat::new(e, m).unwrap();
        assert_eq!((fmt.max, fmt.has_inf), (max as f32, has_inf));
        for scale in [1.0f32, 0.25, 3.0] {
            let c = fp_config(e, m, max, scale);
            let codes: Vec<u32> = (0..256).collect();
            let x: Vec<f32> = codes.iter().map(|&c| decode(c, e, m) * scale).collect();
            for path in PATHS {
                let y = run(path, &[256], &x, &c);
                for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
                    if xi.is_nan() {
                        assert!(yi.is_nan(), "E{e}M{m} code {i:#x}: NaN must stay NaN");
                    } else {
                        assert_eq!(yi.to_bits(), xi.to_bits(), "E{e}M{m} code {i:#x} s={scale} {path:?}: {xi} -> {yi}");
                    }
                }
            }
        }
    }
}

#[test]
fn fp8_saturation_subnormals_and_ties_to_even() {
    let e4 = fp_config(4, 3, 448, 1.0);
    let e5 = fp_config(5, 2, 57344, 1.0);
    let sub = 2f32.powi(-9); // smallest E4M3 subnormal
    let cases_e4: [(f32, f32); 16] = [
        (449.0, 448.0),
        (464.0, 448.0),
        (1e6, 448.0),
        (f32::MAX, 448.0),
        (f32::INFINITY, 448.0), // E4M3FN has no infinity: saturates
        (-f32::INFINITY, -448.0),
        (-500.0, -448.0),
        (0.5 * sub, 0.0), // tie between 0 and the smallest subnormal: even is 0
        (0.5001 * sub, sub),
        (1.5 * sub, 2.0 * sub),     // tie between codes 1 and 2: even
        (2.5 * sub, 2.0 * sub),     // tie between codes 2 and 3: even
        (7.5 * sub, 2f32.powi(-6)), // largest subnormal / smallest normal tie: the normal (code 8)
        (1.0625, 1.0),              // 1 + 1/16: tie between 1.0 and 1.125
        (1.1875, 1.25),             // tie between 1.125 and 1.25
        (-1.0625, -1.0),
        (0.1 * sub, 0.0),
    ];
    let cases_e5: [(f32, f32); 7] = [
        (57344.0, 57344.0),
        (61440.0, 57344.0), // tie with 65536: rounds up, then saturates
        (1e9, 57344.0),
        (f32::INFINITY, f32::INFINITY), // E5M2 keeps infinities
        (f32::NEG_INFINITY, f32::NEG_INFINITY),
        (2f32.powi(-17), 0.0), // half the smallest subnormal 2^-16: tie to even (0)
        (3.0 * 2f32.powi(-17), 2.0 * 2f32.powi(-16)),
    ];
    for path in PATHS {
        for (c, cases) in [(&e4, &cases_e4[..]), (&e5, &cases_e5[..])] {
            let x: Vec<f32> = cases.iter().map(|c| c.0).collect();
            let want: Vec<f32> = cases.iter().map(|c| c.1).collect();
            let y = run(path, &[x.len()], &x, c);
            assert_eq!(y, want, "E{}M{} {path:?}", c.exponent_bits, c.mantissa_bits);
        }
        let nan = run(path, &[1], &[f32::NAN], &e4);
        assert!(nan[0].is_nan());
    }
}

#[test]
fn floating_matches_brute_force_nearest_value() {
    let mut rng = Rng(99);
    // FP8 formats plus generic ones (IEEE-style: E3M2, E2M1, E6M4, E8M7 ~ bfloat16).
    for (e, m) in [(4u32, 3u32), (5, 2), (3, 2), (2, 1), (6, 4), (8, 7)] {
        let fmt = FloatFormat::new(e, m).unwrap();
        let table = positive_table(e, m);
        assert_eq!(table.last().map(|t| t.0), Some(fmt.max), "E{e}M{m} max");
        let min_sub = table[1].0;
        let max = fmt.max;
        let mut x = Vec::new();
        for _ in 0..20_000 {
            // log-uniform over the whole range, both signs, plus exact midpoints
            let k = rng.below(table.len() as u64 - 1) as usize;
            let v = match rng.below(3) {
                0 => table[k].0 + (table[k + 1].0 - table[k].0) * 0.5,
                1 => table[k].0 + (table[k + 1].0 - table[k].0) * rng.unit(),
                _ => min_sub * 0.25 * 2f32.powf(rng.unit() * (max / min_sub).log2().min(120.0) + 3.0),
            };
            x.push(if rng.below(2) == 0 { v } else { -v });
        }
        let want: Vec<f32> = x.iter().map(|&v| nearest(v.abs(), &table).copysign(v)).collect();
        let scalar: Vec<f32> = x.iter().map(|&v| fmt.round(v)).collect();
        assert_all_same(&scalar, &want, &format!("E{e}M{m} scalar"));
        if (max as i64) as f32 != max {
            continue; // range not expressible as integer quant_min/quant_max (E8M7)
        }
        let c = fp_config(e, m, max as i64, 1.0);
        for path in PATHS {
            assert_all_same(&run(path, &[x.len()], &x, &c), &want, &format!("E{e}M{m} {path:?}"));
        }
    }
}

#[test]
fn floating_per_channel() {
    let shape = [2usize, 3, 4];
    let mut c = fp_config(4, 3, 448, 1.0);
    c.policy = QuantizationPolicy::new(&[PerChannel, Floating, Symmetric]).unwrap();
    c.channel_axis = Some(1);
    c.scale = vec![1.0, 0.5, 2.0];
    c.offset = vec![0.0; 3];
    let x: Vec<f32> = (0..24).map(|i| (i as f32 - 11.0) * 37.3).collect();
    let fmt = FloatFormat::E4M3;
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = c.scale[(i / 4) % 3];
            fmt.round(v / s) * s
        })
        .collect();
    for path in PATHS {
        assert_all_same(&run(path, &shape, &x, &c), &want, &format!("{path:?}"));
    }
}

// ---------------------------------------------------------------------------------------
// ONNX semantics through the executor.

/// x → QuantizeLinear(s, zp, axis) → DequantizeLinear(s, zp, axis) → y.
fn qdq_graph(scale: TensorData, zp: TensorData, axis: i64) -> Graph {
    let mut g = Graph::new("qdq");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let s = g.add_initializer("s", scale).unwrap();
    let z = g.add_initializer("z", zp).unwrap();
    let q = g.ensure_variable("q");
    let y = g.ensure_variable("y");
    let op = |t: &str| Operation::new(t, t).with_opset(13).with_attr("axis", Attribute::Int(axis));
    g.add_operation(op("QuantizeLinear"), &[Some(x), Some(s), Some(z)], &[Some(q)]).unwrap();
    g.add_operation(op("DequantizeLinear"), &[Some(q), Some(s), Some(z)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    g
}

fn run_graph(g: &Graph, shape: &[usize], x: &[f32]) -> Vec<f32> {
    let d = Device::cpu();
    let exec = Executor::new(g, &OpRegistry::builtin(), &d, &|_| 13).unwrap();
    let out = exec.run(vec![("x".into(), Tensor::from_f32(shape, x.to_vec(), &d).into())], &mut []).unwrap();
    out[0].1.as_tensor().unwrap().to_f32_vec()
}

#[test]
fn equals_onnx_qdq_uint8_asymmetric_per_tensor() {
    let mut rng = Rng(5);
    let (s, zp) = (0.0371f32, 119u8);
    let x: Vec<f32> = values(&mut rng, 50_000, s, 400.0).into_iter().filter(|v| v.is_finite()).collect();
    let g = qdq_graph(TensorData::from_vec(vec![], &[s]).unwrap(), TensorData::from_vec(vec![], &[zp]).unwrap(), 1);
    let onnx = run_graph(&g, &[x.len()], &x);
    let c = linear_config(8, false, None, vec![s], vec![f32::from(zp)], RoundingPolicy::HalfEven);
    for path in PATHS {
        assert_all_same(&run(path, &[x.len()], &x, &c), &onnx, &format!("uint8 {path:?}"));
    }
    // and with power-of-2 scales, where exact ties occur
    let s2 = 0.125f32;
    let g2 = qdq_graph(TensorData::from_vec(vec![], &[s2]).unwrap(), TensorData::from_vec(vec![], &[7u8]).unwrap(), 1);
    let x2: Vec<f32> = values(&mut rng, 20_000, s2, 300.0).into_iter().filter(|v| v.is_finite()).collect();
    let c2 = linear_config(8, false, None, vec![s2], vec![7.0], RoundingPolicy::HalfEven);
    assert_all_same(&run(KernelPath::Auto, &[x2.len()], &x2, &c2), &run_graph(&g2, &[x2.len()], &x2), "uint8 pow2");
}

#[test]
fn equals_onnx_qdq_int8_symmetric_per_axis() {
    let mut rng = Rng(6);
    let shape = [4usize, 6, 7, 5];
    let n: usize = shape.iter().product();
    for axis in [0usize, 1] {
        let ch = shape[axis];
        let scale: Vec<f32> = (0..ch).map(|i| [0.5f32, 0.013, 0.25, 0.0625, 0.3, 0.07][i % 6]).collect();
        let g = qdq_graph(
            TensorData::from_vec(vec![ch], &scale).unwrap(),
            TensorData::from_vec(vec![ch], &vec![0i8; ch]).unwrap(),
            axis as i64,
        );
        let inner: usize = shape[axis + 1..].iter().product();
        let x: Vec<f32> = (0..n)
            .map(|i| values(&mut rng, 1, scale[(i / inner) % ch], 200.0)[0])
            .map(|v| if v.is_finite() { v } else { 1e9 })
            .collect();
        let onnx = run_graph(&g, &shape, &x);
        let c = linear_config(8, true, Some(axis), scale.clone(), vec![0.0; ch], RoundingPolicy::HalfEven);
        for path in PATHS {
            assert_all_same(&run(path, &shape, &x, &c), &onnx, &format!("int8 axis {axis} {path:?}"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The simulation hook in plain forward.

#[test]
fn executor_fake_quantizes_inputs_in_plain_forward() {
    let mut g = Graph::new("relu");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let y = g.ensure_variable("y");
    let relu = g.add_operation(Operation::new("Relu", "relu").with_opset(17), &[Some(x)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let cfg = linear_config(8, true, None, vec![0.5], vec![0.0], RoundingPolicy::HalfEven);
    g.operation_mut(relu).unwrap().quant_config =
        Some(OperationQuantConfig { input_configs: vec![Some(cfg)], output_configs: vec![None] });

    let d = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &d, &|_| 17).unwrap();
    let feed =
        || vec![("x".to_string(), Value::from(Tensor::from_f32(&[6], vec![0.3, 0.74, -1.2, 1.1, 100.0, 0.25], &d)))];
    let mut sim = QuantSimulation::new(&g, BurnFakeQuant);
    let out = exec.run(feed(), &mut [&mut sim]).unwrap();
    // 0.3/0.5 = 0.6 → 1; 0.74 → 1.48 → 1; 1.1 → 2.2 → 2; 100 → 200 → 127; 0.25 → 0.5 → 0 (even)
    assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![0.5, 0.5, 0.0, 1.0, 63.5, 0.0]);
    assert_eq!(sim.applied, (1, 0));
    // Without the hook: plain float.
    let plain = exec.run(feed(), &mut []).unwrap();
    assert_eq!(plain[0].1.as_tensor().unwrap().to_f32_vec(), vec![0.3, 0.74, 0.0, 1.1, 100.0, 0.25]);
}

#[test]
fn uncalibrated_active_config_fails_the_run_with_a_typed_error() {
    let mut g = Graph::new("relu");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let y = g.ensure_variable("y");
    let relu = g.add_operation(Operation::new("Relu", "relu").with_opset(17), &[Some(x)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let cfg = linear_config(8, true, None, vec![], vec![], RoundingPolicy::HalfEven);
    g.operation_mut(relu).unwrap().quant_config =
        Some(OperationQuantConfig { input_configs: vec![None], output_configs: vec![Some(cfg)] });
    let d = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &d, &|_| 17).unwrap();
    let mut sim = QuantSimulation::new(&g, BurnFakeQuant);
    let err = exec.run(vec![("x".into(), Tensor::from_f32(&[1], vec![1.0], &d).into())], &mut [&mut sim]).unwrap_err();
    assert!(matches!(err, ExecError::Ir(IrError::InvalidQuantConfig(ref m)) if m.contains("no scale")), "{err}");
}

#[test]
fn other_float_dtypes_are_computed_in_f32_and_cast_back() {
    let d = Device::cpu();
    let c = linear_config(8, true, None, vec![0.5], vec![0.0], RoundingPolicy::HalfEven);
    let t = Tensor::from_f32(&[3], vec![0.3, -0.8, 70.0], &d).cast(mppq_ir::DataType::Double).unwrap();
    let y = mppq_exec::fake_quant_tensor(t, &c).unwrap();
    assert_eq!(y.dtype(), mppq_ir::DataType::Double);
    assert_eq!(y.to_f64_vec(), vec![0.5, -1.0, 63.5]);
}

#[test]
fn negative_near_ties_and_huge_values_every_policy_both_paths() {
    let near = [
        -0.499_999_97f32,
        -0.5,
        -0.500_000_06,
        -1e-10,
        -0.0,
        0.0,
        1e-10,
        0.499_999_97,
        0.5,
        0.500_000_06,
        -1.5,
        -2.5,
        1.5,
        2.5,
        -1.499_999_9,
        -2.500_000_2,
        126.5,
        -127.5,
        -128.5,
        127.5,
        4_194_303.5,
        -4_194_303.5,
    ];
    for p in RoundingPolicy::ALL {
        let c = linear_config(8, true, None, vec![1.0], vec![0.0], p);
        let want: Vec<f32> = near.iter().map(|&x| ref_linear(x, 1.0, 0.0, -128, 127, p)).collect();
        // 16-bit range: values up to 2^23 stay unsaturated.
        let c16 = linear_config(16, true, None, vec![1.0 / 256.0], vec![0.0], p);
        let big: Vec<f32> = [
            8_388_607.5f32,
            -8_388_607.5,
            4_194_304.5,
            -4_194_304.5,
            8_388_608.0,
            -8_388_608.0,
            16_777_216.0,
            3e7,
            -3e7,
        ]
        .iter()
        .map(|v| v / 256.0)
        .chain(near.iter().copied())
        .collect();
        let want16: Vec<f32> = big.iter().map(|&x| ref_linear(x, 1.0 / 256.0, 0.0, -32768, 32767, p)).collect();
        let c32 = linear_config(32, true, None, vec![1.0], vec![0.0], p);
        let huge: Vec<f32> =
            [8_388_607.5f32, -8_388_607.5, 4_194_304.5, -4_194_304.5, 16_777_217.0, 1e9, -1e9].to_vec();
        let want32: Vec<f32> = huge.iter().map(|&x| ref_linear(x, 1.0, 0.0, c32.quant_min, c32.quant_max, p)).collect();
        for path in PATHS {
            assert_all_same(&run(path, &[near.len()], &near, &c), &want, &format!("{p:?} {path:?}"));
            assert_all_same(&run(path, &[big.len()], &big, &c16), &want16, &format!("16-bit {p:?} {path:?}"));
            // The chain clamps in f32, where 2^31 − 1 is not exact: compare below saturation only.
            assert_all_same(&run(path, &[huge.len()], &huge, &c32), &want32, &format!("32-bit {p:?} {path:?}"));
        }
    }
}

#[test]
fn fused_fp8_matches_scalar_format_rounding_on_random_bit_patterns() {
    let mut rng = Rng(2024);
    let x: Vec<f32> = (0..200_000).map(|_| f32::from_bits(rng.next() as u32)).collect();
    for (e, m, max) in [(4u32, 3u32, 448i64), (5, 2, 57344)] {
        let fmt = FloatFormat::new(e, m).unwrap();
        let want: Vec<f32> = x.iter().map(|&v| fmt.round(v)).collect();
        let c = fp_config(e, m, max, 1.0);
        for path in PATHS {
            assert_all_same(&run(path, &[x.len()], &x, &c), &want, &format!("E{e}M{m} {path:?}"));
        }
    }
}

#[test]
fn fused_kernel_copies_a_shared_contiguous_buffer() {
    let d = Device::cpu();
    let c = linear_config(8, true, None, vec![0.5], vec![0.0], RoundingPolicy::HalfEven);
    let base = Tensor::from_f32(&[4], vec![0.3, 0.8, -7.1, 500.0], &d);
    let y = mppq_exec::fake_quant_tensor(base.clone(), &c).unwrap();
    assert_eq!(y.to_f32_vec(), vec![0.5, 1.0, -7.0, 63.5]);
    assert_eq!(base.to_f32_vec(), vec![0.3, 0.8, -7.1, 500.0]);
}

/// A weight config with the x86 pair limit: both kernel paths settle the rounded codes exactly as
/// `PairLimit::apply` does (what the QDQ exporter writes), per output channel.
#[test]
fn pair_limited_weights_are_settled_like_the_export() {
    use mppq_ir::quant::{PairLimit, PairOrder};
    let device = Device::cpu();
    // MatMul B [K = 6, N = 2], channels on axis 1, pairs along K.
    let shape = [6usize, 2];
    let scale = vec![0.5f32, 0.25];
    let codes_in: Vec<i64> = vec![127, 3, 127, -60, -5, -70, 20, -70, 100, 0, 100, 1];
    let values: Vec<f32> = codes_in.iter().enumerate().map(|(i, q)| *q as f32 * scale[i % 2]).collect();
    let mut c = linear_config(8, true, Some(1), scale.clone(), vec![0.0; 2], RoundingPolicy::HalfEven);
    c.pair_limit = Some(PairLimit::x86(vec![PairOrder { axes: vec![0], restart_per_position: false }]));
    let mut expected = codes_in.clone();
    assert!(c.pair_limit.as_ref().unwrap().apply(&mut expected, &shape) > 0);
    for path in PATHS {
        let t = Tensor::from_f32(&shape, values.clone(), &device);
        let out = fake_quant_with(t, &c, path).unwrap().to_f32_vec();
        let got: Vec<i64> = out.iter().enumerate().map(|(i, y)| (y / scale[i % 2]).round() as i64).collect();
        assert_eq!(got, expected, "{path:?}");
        assert_eq!(c.pair_limit.as_ref().unwrap().violations(&got, &shape), 0);
    }
    // Same-sign pairs over 128 settle (127 + 127, 100 + 100, −70 − 70 → 64 each); opposite signs
    // and small pairs stay.
    assert_eq!(expected.iter().step_by(2).copied().collect::<Vec<_>>(), vec![64, 64, -5, 20, 64, 64]);
    assert_eq!(expected.iter().skip(1).step_by(2).copied().collect::<Vec<_>>(), vec![3, -60, -64, -64, 0, 1]);
}
