//! Training on autodiff devices: the straight-through fake quantization gives the forward
//! numbers of the CPU fast path bit for bit; its gradients (input and learnable scale) equal
//! finite differences of its surrogate (round frozen at the evaluation point, which is what the
//! straight-through estimator differentiates); a quantized Conv graph runs the same forward on
//! the autodiff CPU device as on the plain one, and passes gradients to its weight.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;
use mppq_exec::simulation::training::{LearnableScale, TrainingSimulation, backward, require_grad, ste_fake_quant};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value, fake_quant_tensor};
use mppq_ir::quant::{OperationQuantConfig, QuantizationState, RoundingPolicy, TensorQuantConfig};
use mppq_ir::{Attribute, Graph, Operation, TensorData};

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
    }
    fn values(&mut self, n: usize, span: f32) -> Vec<f32> {
        (0..n).map(|_| (self.unit() * 2.0 - 1.0) * span).collect()
    }
}

fn config(bits: u32, symmetric: bool, axis: Option<usize>, scale: Vec<f32>, offset: Vec<f32>) -> TensorQuantConfig {
    let mut c = TensorQuantConfig::linear(bits, symmetric, axis).unwrap();
    c.scale = scale;
    c.offset = offset;
    c.state = QuantizationState::Activated;
    c
}

/// `Σ w·y` as a tracked scalar.
fn weighted_sum(y: &Tensor, w: &[f32], device: &Device) -> DispatchTensor {
    let w = Tensor::from_f32(&y.shape(), w.to_vec(), device).into_dispatch();
    Dispatch::float_sum(Dispatch::float_mul(y.dispatch().clone(), w))
}

#[test]
fn ste_forward_is_bit_identical_to_the_fast_path() {
    let mut rng = Rng(7);
    let ad = Device::cpu().autodiff();
    let shape = [2usize, 3, 5];
    let x = rng.values(30, 3.0);
    for (bits, symmetric, axis, rounding) in [
        (8, true, None, RoundingPolicy::HalfEven),
        (4, false, Some(1), RoundingPolicy::HalfEven),
        (4, true, Some(1), RoundingPolicy::HalfUp),
        (2, false, None, RoundingPolicy::HalfAwayFromZero),
    ] {
        let channels = if axis.is_some() { 3 } else { 1 };
        let scale: Vec<f32> = (0..channels).map(|c| 0.07 + 0.05 * c as f32).collect();
        let offset: Vec<f32> = (0..channels).map(|c| if symmetric { 0.0 } else { c as f32 + 1.0 }).collect();
        let mut cfg = config(bits, symmetric, axis, scale.clone(), offset);
        cfg.rounding = rounding;
        let fast = fake_quant_tensor(Tensor::from_f32(&shape, x.clone(), &Device::cpu()), &cfg).unwrap().to_f32_vec();
        let plain = ste_fake_quant(Tensor::from_f32(&shape, x.clone(), &ad), &cfg, None).unwrap().to_f32_vec();
        let learned = LearnableScale::new(scale, &ad);
        let with_scale =
            ste_fake_quant(Tensor::from_f32(&shape, x.clone(), &ad), &cfg, Some(&learned)).unwrap().to_f32_vec();
        let bits_of = |v: &[f32]| v.iter().map(|f| (f + 0.0).to_bits()).collect::<Vec<_>>();
        assert_eq!(bits_of(&fast), bits_of(&plain), "{bits} bits, {rounding:?}");
        assert_eq!(bits_of(&fast), bits_of(&with_scale), "{bits} bits, {rounding:?}, learnable scale");
    }
}

/// The surrogate the STE differentiates, in f64: round's result frozen at `(x0, s0)`.
fn surrogate(x: f64, s: f64, frozen: f64, o: f64, qmin: f64, qmax: f64) -> f64 {
    let v = x / s;
    let q = (frozen + v + o).clamp(qmin, qmax);
    (q - o) * s
}

#[test]
fn ste_gradients_match_finite_differences_of_the_surrogate() {
    let mut rng = Rng(11);
    let ad = Device::cpu().autodiff();
    let shape = [4usize, 3];
    // Per channel along axis 1; asymmetric 4-bit: values beyond both ends of the range.
    let (scale, offset) = (vec![0.11f32, 0.23, 0.05], vec![3.0f32, 8.0, 1.0]);
    let cfg = config(4, false, Some(1), scale.clone(), offset.clone());
    let (qmin, qmax) = (cfg.quant_min as f64, cfg.quant_max as f64);
    // No element exactly at a range end, where the clamp has a kink (one-sided derivatives).
    let x: Vec<f32> = rng
        .values(12, 2.0)
        .into_iter()
        .enumerate()
        .map(|(i, x)| {
            let q = (x / scale[i % 3]).round_ties_even() + offset[i % 3];
            if f64::from(q) == qmin || f64::from(q) == qmax { x * 1.5 } else { x }
        })
        .collect();
    let w = rng.values(12, 1.0);
    let xt = Tensor::from_dispatch(require_grad(Tensor::from_f32(&shape, x.clone(), &ad).into_dispatch()));
    // A learnable scale and offset (LSQ+): the offset enters as `base + round(shift)`.
    let learned = LearnableScale::new(scale.clone(), &ad).with_offset(offset.clone(), &ad);
    let y = ste_fake_quant(xt.clone(), &cfg, Some(&learned)).unwrap();
    let plain = ste_fake_quant(Tensor::from_f32(&shape, x.clone(), &ad), &cfg, None).unwrap();
    assert_eq!(y.to_f32_vec(), plain.to_f32_vec(), "a learnable offset starts from the calibrated one");
    let grads = backward(weighted_sum(&y, &w, &ad));
    let gx = Tensor::from_dispatch(grads.of(xt.dispatch()).unwrap()).to_f32_vec();
    let gf = Tensor::from_dispatch(grads.of(&learned.factor).unwrap()).to_f32_vec();
    let shift = &learned.offset.as_ref().unwrap().shift;
    let go = Tensor::from_dispatch(grads.of(shift).unwrap()).to_f32_vec();

    let h = 1e-4;
    let mut gf_ref = [0f64; 3];
    let mut go_ref = [0f64; 3];
    for i in 0..12 {
        let c = i % 3;
        let (s, o) = (f64::from(scale[c]), f64::from(offset[c]));
        let xi = f64::from(x[i]);
        let v0 = f64::from(x[i] / scale[c]);
        let frozen = v0.round_ties_even() - v0;
        let f = |x: f64, s: f64| surrogate(x, s, frozen, o, qmin, qmax);
        let dx = (f(xi + h, s) - f(xi - h, s)) / (2.0 * h);
        let ds = (f(xi, s * (1.0 + h)) - f(xi, s * (1.0 - h))) / (2.0 * h); // d/d(factor) at 1
        let g = |o: f64| surrogate(xi, s, frozen, o, qmin, qmax);
        go_ref[c] += f64::from(w[i]) * (g(o + h) - g(o - h)) / (2.0 * h); // round(shift) frozen at 0
        assert!((f64::from(gx[i]) - f64::from(w[i]) * dx).abs() < 1e-3, "∂/∂x[{i}]: {} vs {}", gx[i], w[i] as f64 * dx);
        gf_ref[c] += f64::from(w[i]) * ds;
    }
    for c in 0..3 {
        assert!(
            (f64::from(gf[c]) - gf_ref[c]).abs() < 1e-3 * (1.0 + gf_ref[c].abs()),
            "∂/∂factor[{c}]: {} vs {}",
            gf[c],
            gf_ref[c]
        );
    }
    for c in 0..3 {
        assert!(
            (f64::from(go[c]) - go_ref[c]).abs() < 1e-3 * (1.0 + go_ref[c].abs()),
            "∂/∂shift[{c}]: {} vs {}",
            go[c],
            go_ref[c]
        );
    }
    // Saturated elements carry the offset's gradient (−s each); inside the range it is 0.
    assert!(go_ref.iter().any(|g| g.abs() > 1e-3), "{go_ref:?}");
    // Some elements saturate (zero input gradient) and some do not: both branches are tested.
    assert!(gx.contains(&0.0) && gx.iter().any(|g| *g != 0.0), "{gx:?}");
}

/// x[1,2,5,5] → Conv(w[3,2,3,3], b) → y, with the weight and activations quantized (8-bit).
fn conv_graph(rng: &mut Rng) -> Graph {
    let mut g = Graph::new("conv");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let w = g.add_initializer("w", TensorData::from_vec(vec![3, 2, 3, 3], &rng.values(54, 0.5)).unwrap()).unwrap();
    let b = g.add_initializer("b", TensorData::from_vec(vec![3], &rng.values(3, 0.1)).unwrap()).unwrap();
    let y = g.ensure_variable("y");
    let conv = Operation::new("Conv", "conv").with_opset(17).with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1]));
    let id = g.add_operation(conv, &[Some(x), Some(w), Some(b)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    g.operation_mut(id).unwrap().quant_config = Some(OperationQuantConfig {
        input_configs: vec![
            Some(config(8, false, None, vec![0.01], vec![128.0])),
            Some(config(8, true, Some(0), vec![0.004, 0.0041, 0.0039], vec![0.0; 3])),
            None,
        ],
        output_configs: vec![Some(config(8, false, None, vec![0.02], vec![120.0]))],
    });
    g
}

#[test]
fn quantized_conv_runs_the_same_forward_and_trains_its_weight() {
    let mut rng = Rng(3);
    let g = conv_graph(&mut rng);
    let x = rng.values(50, 1.0);
    let reg = OpRegistry::builtin();
    let cpu = Device::cpu();
    let ad = cpu.autodiff();
    let plain = Executor::new(&g, &reg, &cpu, &|_| 17).unwrap();
    let mut sim = QuantSimulation::new(&g, BurnFakeQuant).float_kernels();
    let feed = |d: &Device| vec![("x".to_string(), Value::Tensor(Tensor::from_f32(&[1, 2, 5, 5], x.clone(), d)))];
    let reference = plain.run(feed(&cpu), &mut [&mut sim]).unwrap()[0].1.as_tensor().unwrap().to_f32_vec();

    let exec = Executor::new(&g, &reg, &ad, &|_| 17).unwrap();
    let mut train = TrainingSimulation::new(&g);
    let wvar = g.var_named("w").unwrap();
    let weight = require_grad(
        Tensor::from_data(g.variable(wvar).unwrap().value.as_ref().unwrap(), &ad).unwrap().into_dispatch(),
    );
    train.substitutes.insert(wvar, Value::Tensor(Tensor::from_dispatch(weight.clone())));
    let out = exec.run(feed(&ad), &mut [&mut train]).unwrap();
    let y = out[0].1.as_tensor().unwrap().clone();
    let trained = y.to_f32_vec();
    // Same grid (output step 0.02); convolution sums in another order than the CPU kernel.
    let off_grid = reference.iter().zip(&trained).filter(|(a, b)| (*a - *b).abs() > 1e-6).count();
    assert!(off_grid <= 1, "{off_grid} of {} outputs differ", reference.len());
    let loss = Dispatch::float_sum(Dispatch::float_powi_scalar(y.into_dispatch(), Scalar::from(2)));
    let grads = backward(loss);
    let gw = Tensor::from_dispatch(grads.of(&weight).unwrap()).to_f32_vec();
    assert_eq!(gw.len(), 54);
    assert!(gw.iter().all(|g| g.is_finite()) && gw.iter().any(|g| *g != 0.0));
}
