//! The simulation of the integer kernels ONNX Runtime fuses QDQ operations into (QLinearAdd,
//! QLinearMul, QLinearMatMul, QLinearSigmoid), through the executor: one-operation graphs fed
//! dequantized codes, whose output codes must be those ORT 1.31 computes (CPU EP, x86-64) on a
//! DequantizeLinear → op → QuantizeLinear graph with the same parameters. Each case was picked
//! (by running ORT over all codes or random inputs) where float math on dequantized values gives
//! another code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::quant::{OperationQuantConfig, QuantizationState, RoundingPolicy, TensorQuantConfig};
use mppq_ir::{Graph, Operation};

/// A uint8 (`signed = false`) or int8 config; per channel on `axis` when it has several scales.
fn config(signed: bool, scale: Vec<f32>, zero: Vec<f32>, axis: Option<usize>) -> TensorQuantConfig {
    let mut c = TensorQuantConfig::linear(8, signed, axis).unwrap();
    (c.quant_min, c.quant_max) = if signed { (-128, 127) } else { (0, 255) };
    c.scale = scale;
    c.offset = zero;
    c.rounding = RoundingPolicy::HalfEven;
    c.state = QuantizationState::Activated;
    c
}

fn uint8(scale: f32, zero: f32) -> TensorQuantConfig {
    config(false, vec![scale], vec![zero], None)
}

/// One input: its codes, shape and config.
struct Input<'a>(&'a [f32], &'a [usize], TensorQuantConfig);

/// Runs `op_type` on the dequantized codes under the quantization simulation; returns the
/// output codes under `y`.
fn run_codes(op_type: &str, inputs: &[Input<'_>], y: TensorQuantConfig) -> Vec<f32> {
    let mut g = Graph::new("g");
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("x{i}")).collect();
    let ins: Vec<_> = names.iter().map(|n| Some(g.ensure_variable(n))).collect();
    for v in ins.iter().flatten() {
        g.add_graph_input(*v).unwrap();
    }
    let out = g.ensure_variable("y");
    let op = g.add_operation(Operation::new(op_type, "op").with_opset(13), &ins, &[Some(out)]).unwrap();
    g.add_graph_output(out).unwrap();
    let (sy, zy) = (y.scale[0], y.offset[0]);
    g.operation_mut(op).unwrap().quant_config = Some(OperationQuantConfig {
        input_configs: inputs.iter().map(|i| Some(i.2.clone())).collect(),
        output_configs: vec![Some(y)],
    });
    let d = Device::cpu();
    let feeds = inputs
        .iter()
        .zip(&names)
        .map(|(Input(codes, shape, c), name)| {
            // Per-channel parameters run along the last axis (MatMul's B).
            let values = codes.iter().enumerate().map(|(i, q)| {
                let ch = if c.scale.len() == 1 { 0 } else { i % c.scale.len() };
                (q - c.offset[ch]) * c.scale[ch]
            });
            (name.clone(), Value::from(Tensor::from_f32(shape, values.collect(), &d)))
        })
        .collect();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &d, &|_| 13).unwrap();
    let mut sim = QuantSimulation::new(&g, BurnFakeQuant);
    let out = exec.run(feeds, &mut [&mut sim]).unwrap();
    out[0].1.as_tensor().unwrap().to_f32_vec().iter().map(|v| (v / sy).round_ties_even() + zy).collect()
}

/// MLAS's AVX2 QLinearAdd rounds `fma(q_a, r_a, fma(q_b, r_b, z_y − fma(r_a, z_a, r_b·z_b)))`
/// once: on these code pairs the unfused sum (and dequantize-add-quantize) is a step off.
#[test]
fn add_rounds_like_mlas_fused_multiply_adds() {
    // (s_a, z_a), (s_b, z_b), (s_y, z_y), (q_a, q_b), ORT's q_y
    let cases = [
        ((0.089_576_066, 12.0), (0.026_579_97, 21.0), (0.064_202_78, 96.0), (7.0, 155.0), 144.0),
        ((0.039_685_465, 241.0), (0.015_022_051_5, 195.0), (0.064_765_275, 237.0), (156.0, 38.0), 149.0),
        ((0.099_534_17, 158.0), (0.095_149_65, 213.0), (0.048_704_29, 193.0), (251.0, 31.0), 27.0),
        ((0.052_255_157, 19.0), (0.055_284_657, 106.0), (0.079_649_64, 72.0), (247.0, 103.0), 220.0),
    ];
    for ((sa, za), (sb, zb), (sy, zy), (qa, qb), runtime) in cases {
        let inputs = [Input(&[qa], &[1], uint8(sa, za)), Input(&[qb], &[1], uint8(sb, zb))];
        assert_eq!(run_codes("Add", &inputs, uint8(sy, zy)), [runtime], "{qa} + {qb}");
        let (ra, rb): (f32, f32) = (sa / sy, sb / sy);
        let unfused = ((zy - (ra * za + rb * zb) + qa * ra) + qb * rb).round_ties_even();
        assert_eq!((unfused - runtime).abs(), 1.0);
    }
}

/// An A broadcast along the innermost axis (`[2, 1] + [1, 256]`): ORT streams B through the
/// kernel and passes A as its scalar, so the fused multiply-adds take the inputs the other way
/// round; the same pair with A streamed rounds to the other code.
#[test]
fn add_with_a_broadcast_innermost_swaps_the_kernel_roles() {
    // (s_a, z_a), (s_b, z_b), (s_y, z_y), q_a, q_b, ORT's q_y
    let cases = [
        ((0.053_171_474, 196.0), (0.053_106_576, 3.0), (0.027_438_441, 80.0), 121.0, 83, 89.0),
        ((0.013_153_451, 238.0), (0.085_268_04, 250.0), (0.039_948_672, 243.0), 240.0, 167, 66.0),
        ((0.087_115_675, 79.0), (0.031_476_15, 14.0), (0.047_476_716, 190.0), 0.0, 161, 142.0),
    ];
    let qb: Vec<f32> = (0..256).map(|q| q as f32).collect();
    for ((sa, za), (sb, zb), (sy, zy), qa, at, runtime) in cases {
        let broadcast = [Input(&[qa, 255.0 - qa], &[2, 1], uint8(sa, za)), Input(&qb, &[1, 256], uint8(sb, zb))];
        let got = run_codes("Add", &broadcast, uint8(sy, zy));
        assert_eq!((got.len(), got[at]), (512, runtime), "{qa} + {at}");
        let streamed = [Input(&[qa], &[1], uint8(sa, za)), Input(&[at as f32], &[1], uint8(sb, zb))];
        assert_eq!((run_codes("Add", &streamed, uint8(sy, zy))[0] - runtime).abs(), 1.0);
    }
}

/// QLinearMul: the centred codes multiply exactly, `rne(acc·(s_a·s_b/s_y) + z_y)`.
#[test]
fn mul_requantizes_the_exact_product_like_qlinearmul() {
    let (a, b, y) = (uint8(0.089_576_066, 12.0), uint8(0.026_579_97, 21.0), uint8(0.642_027_8, 96.0));
    let (qa, qb) = ([79.0, 175.0], [184.0, 88.0]);
    let got = run_codes("Mul", &[Input(&qa, &[2], a), Input(&qb, &[2], b)], y);
    assert_eq!(got, [136.0, 136.0]);
    // Dequantize, multiply, quantize: 137 for both.
    let plain =
        |qa: f32, qb: f32| ((qa - 12.0) * 0.089_576_066f32 * ((qb - 21.0) * 0.026_579_97) / 0.642_027_8).round();
    assert_eq!([plain(79.0, 184.0) + 96.0, plain(175.0, 88.0) + 96.0], [137.0, 137.0]);
}

/// QLinearMatMul with per-column int8 weights: exact accumulation, `m[n] = s_a·s_b[n]/s_y`.
#[test]
fn matmul_requantizes_per_column_like_qlinearmatmul() {
    let a = [171.0, 204.0, 162.0, 53.0, 77.0, 0.0, 36.0, 6.0];
    #[rustfmt::skip]
    let b = [
        87.0, -26.0, 76.0, -7.0,   81.0, -101.0, 124.0, 56.0,   -68.0, 36.0, -44.0, -30.0,
        36.0, -97.0, -101.0, -18.0,   99.0, -88.0, -110.0, 67.0,   -13.0, 2.0, -63.0, -126.0,
        -73.0, -9.0, -46.0, -30.0,   -55.0, -79.0, -56.0, 117.0,
    ];
    let b_scales = vec![0.007_008_598, 0.009_871_717, 0.001_446_416_5, 0.006_213_436];
    let weights = config(true, b_scales, vec![0.0; 4], Some(1));
    let inputs = [Input(&a, &[1, 8], uint8(0.027_618_57, 201.0)), Input(&b, &[8, 4], weights)];
    // Float math on dequantized values gives 108 in the last column.
    assert_eq!(run_codes("MatMul", &inputs, uint8(0.006_046_648, 13.0)), [255.0, 255.0, 255.0, 109.0]);
}

/// QLinearSigmoid: a table of MLAS's logistic on the dequantized codes. Code 170 maps to 227
/// there; `1/(1 + e^−x)` rounds to 226 (the one entry of 256 where they differ, on a Sigmoid
/// of PP-OCRv4 rec).
#[test]
fn sigmoid_looks_up_mlas_logistic_like_qlinearsigmoid() {
    let codes = [0.0, 100.0, 134.0, 160.0, 170.0, 180.0, 255.0];
    let got = run_codes("Sigmoid", &[Input(&codes, &[7], uint8(0.057_381_652, 134.0))], uint8(0.003_918_447_5, 0.0));
    assert_eq!(got, [0.0, 32.0, 128.0, 208.0, 227.0, 238.0, 255.0]);
}

/// The memo of constant inputs: runs with it compute exactly what runs without it compute, and
/// a changed weight config (same weight buffer) is honoured rather than served from the memo.
#[test]
fn memoized_weights_give_the_same_numbers_and_follow_config_changes() {
    let mut g = Graph::new("conv");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let weights: Vec<f32> = (0..54).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.05).collect();
    let w = g.add_initializer("w", mppq_ir::TensorData::from_vec(vec![3, 2, 3, 3], &weights).unwrap()).unwrap();
    let b = g.add_initializer("b", mppq_ir::TensorData::from_vec(vec![3], &[0.1f32, -0.2, 0.05]).unwrap()).unwrap();
    let y = g.ensure_variable("y");
    let conv = Operation::new("Conv", "conv").with_opset(17);
    let op = g.add_operation(conv, &[Some(x), Some(w), Some(b)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    let (sx, sw) = (0.01f32, [0.004f32, 0.0041, 0.0039]);
    let mut bias = TensorQuantConfig::linear(32, true, Some(0)).unwrap();
    bias.scale = sw.iter().map(|s| sx * s).collect();
    bias.offset = vec![0.0; 3];
    bias.state = QuantizationState::Passive;
    let configs = |w_scale: Vec<f32>| OperationQuantConfig {
        input_configs: vec![
            Some(uint8(sx, 128.0)),
            Some(config(true, w_scale, vec![0.0; 3], Some(0))),
            Some(bias.clone()),
        ],
        output_configs: vec![Some(uint8(0.02, 120.0))],
    };
    g.operation_mut(op).unwrap().quant_config = Some(configs(sw.to_vec()));
    let d = Device::cpu();
    let exec = Executor::new(&g, &OpRegistry::builtin(), &d, &|_| 17).unwrap();
    let input: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let feed = || vec![("x".to_string(), Value::from(Tensor::from_f32(&[1, 2, 5, 5], input.clone(), &d)))];
    let memo = mppq_exec::SimulationMemo::new();
    let run = |g: &Graph, memo: Option<&mppq_exec::SimulationMemo>| {
        let mut sim = QuantSimulation::new(g, BurnFakeQuant);
        if let Some(memo) = memo {
            sim = sim.with_memo(memo);
        }
        let out = exec.run(feed(), &mut [&mut sim]).unwrap();
        assert_eq!(sim.applied, (3, 1));
        out[0].1.as_tensor().unwrap().to_f32_vec()
    };
    let reference = run(&g, None);
    assert_eq!(run(&g, Some(&memo)), reference);
    assert_eq!(run(&g, Some(&memo)), reference, "from the memo");
    // Coarser weight steps: other numbers, with or without the memo.
    g.operation_mut(op).unwrap().quant_config = Some(configs(sw.iter().map(|s| s * 8.0).collect()));
    let changed = run(&g, None);
    assert_ne!(changed, reference);
    assert_eq!(run(&g, Some(&memo)), changed);
}
