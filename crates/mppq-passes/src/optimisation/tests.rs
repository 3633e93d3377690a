//! Tests of the optimisation passes: each on a graph where it must help, measured on held-out
//! inputs (never the calibration batches) against the quantization without it; equivalence-
//! preserving passes leave the float output unchanged; the guard undoes a pass that hurts.

use crate::error::Result;
use crate::optimisation::bias_correction::BiasCorrectionSetting;
use crate::optimisation::equalization::{Equalization, find_pairs};
use crate::optimisation::smooth_quant::{SmoothQuant, SmoothQuantSetting};
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::test_graphs::{Feeds, Harness, graph_with_input, max_relative_difference, snr_db, unary, values, var};
use crate::{PipelineSetting, op_params, write_param};
use mppq_exec::{Tensor, Value};
use mppq_ir::quant::ObserverKind;
use mppq_ir::{Attribute, Graph, Operation, TensorData, VarId};
use mppq_quant::quantizer::{LowBitQuantizer, OnnxRuntimeQuantizer, Quantizer};

/// 8-bit per-tensor symmetric weights, 8-bit asymmetric activations: where equalization matters.
fn per_tensor_int8() -> LowBitQuantizer {
    LowBitQuantizer { weight_bits: 8, weight_per_channel: false, ..LowBitQuantizer::default() }
}

fn constant(g: &mut Graph, name: &str, shape: &[usize], values: Vec<f32>) -> VarId {
    g.add_initializer(name, TensorData::from_vec(shape.to_vec(), &values).unwrap()).unwrap()
}

fn conv_with(g: &mut Graph, name: &str, x: VarId, w: (Vec<usize>, Vec<f32>), b: Vec<f32>, pad: i64) -> VarId {
    let w = constant(g, &format!("{name}.w"), &w.0, w.1);
    let b = constant(g, &format!("{name}.b"), &[b.len()], b);
    let y = var(g, &format!("{name}.out"));
    let op = Operation::new("Conv", name).with_attr("pads", Attribute::Ints(vec![pad; 4]));
    g.add_operation(op, &[Some(x), Some(w), Some(b)], &[Some(y)]).unwrap();
    y
}

/// x[1,4,8,8] → Conv(4→8, 3×3) → Relu → Conv(8→8, 3×3) → y, with the first Conv's output
/// channels spread over 100× (0.01 … 1) and the second Conv's input channels compensating, as
/// BatchNorm folding leaves them.
fn unbalanced_conv_pair() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let spread: Vec<f32> = (0..8).map(|c| 10f32.powf(-2.0 + 2.0 * c as f32 / 7.0)).collect();
    let w1: Vec<f32> = values(8 * 4 * 9, 1, 0.3).iter().enumerate().map(|(i, v)| v * spread[i / 36]).collect();
    let b1: Vec<f32> = values(8, 2, 0.2).iter().enumerate().map(|(c, v)| v * spread[c]).collect();
    let h = conv_with(&mut g, "conv1", x, (vec![8, 4, 3, 3], w1), b1, 1);
    let r = unary(&mut g, "Relu", "relu", h);
    let w2: Vec<f32> = values(8 * 8 * 9, 3, 0.3).iter().enumerate().map(|(i, v)| v / spread[(i / 9) % 8]).collect();
    let y = conv_with(&mut g, "conv2", r, (vec![8, 8, 3, 3], w2), values(8, 4, 0.2), 1);
    g.add_graph_output(y).unwrap();
    g
}

/// Inputs with seeds the calibration batches never use.
fn held_out(h: &Harness, name: &str, shape: &[usize], n: usize) -> Vec<Feeds> {
    (0..n).map(|i| h.input(name, shape, 1000.0 + i as f32)).collect()
}

/// The held-out SNR of `graph` quantized by `quantizer` with `setting`, calibrated on 8 batches.
fn quantized_snr(
    graph: Graph,
    input: (&str, &[usize]),
    quantizer: &dyn Quantizer,
    setting: &PipelineSetting,
) -> (f64, Vec<PassReport>) {
    let mut h = Harness::new(graph);
    h.calibration(input.0, input.1, 8);
    let feeds = held_out(&h, input.0, input.1, 4);
    let reference = h.fp32_over(&feeds);
    h.quantize(quantizer);
    let reports = h.pipeline(setting);
    (snr_db(&reference, &h.sim_over(&feeds)), reports)
}

/// Calibration only, and calibration with the passes `json` switches on (unguarded, so the pass's
/// own effect is measured).
fn settings(json: &str) -> (PipelineSetting, PipelineSetting) {
    let plain = PipelineSetting { optimize: 0, ..PipelineSetting::default() };
    let mut with = PipelineSetting::from_json(json).unwrap();
    with.optimize = 0;
    with.guard.enabled = false;
    (plain, with)
}

#[test]
fn equalization_finds_the_pair_keeps_the_float_output_and_helps_per_tensor_weights() {
    let graph = unbalanced_conv_pair();
    let pairs = find_pairs(&graph, false);
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].relays, ["Relu"]);

    let mut h = Harness::new(graph.clone());
    h.calibration("x", &[1, 4, 8, 8], 8);
    let feeds = held_out(&h, "x", &[1, 4, 8, 8], 4);
    let before = h.fp32_over(&feeds);
    let report = h.run_alone(Box::new(Equalization::default()));
    assert_eq!(report.changed, 1, "{report}");
    assert!(max_relative_difference(&before, &h.fp32_over(&feeds)) <= 1e-4);
    // The channel ranges of both weights now match.
    let w1 = op_params(&h.graph, h.op("conv1")).unwrap().weight.unwrap();
    let r1: Vec<f32> =
        (0..8).map(|c| w1.values[c * 36..(c + 1) * 36].iter().fold(0f32, |m, v| m.max(v.abs()))).collect();
    let spread = r1.iter().fold(0f32, |m, v| m.max(*v)) / r1.iter().fold(f32::MAX, |m, v| m.min(*v));
    assert!(spread < 10.0, "channel ranges still spread {spread}× after equalization: {r1:?}");

    let (plain, with) = settings(r#"{"equalization": {"enabled": true}}"#);
    let input = ("x", &[1usize, 4, 8, 8][..]);
    let (base, _) = quantized_snr(graph.clone(), input, &per_tensor_int8(), &plain);
    let (equalized, _) = quantized_snr(graph, input, &per_tensor_int8(), &with);
    println!("held-out SNR: {base:.2} dB → {equalized:.2} dB");
    assert!(equalized >= base + 6.0, "equalization: {base:.2} dB → {equalized:.2} dB");
}

fn gains_of(channel: usize) -> f32 {
    if channel == 2 || channel == 5 { 40.0 } else { 1.0 }
}

/// x[1,16,8] → Mul(channel gains: two channels 40×) → MatMul(8→8) → y.
fn outlier_matmul() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let gains: Vec<f32> = (0..8).map(gains_of).collect();
    let gain = constant(&mut g, "gain", &[8], gains);
    let a = var(&mut g, "a");
    g.add_operation(Operation::new("Mul", "gain_mul"), &[Some(x), Some(gain)], &[Some(a)]).unwrap();
    // The outlier channels meet small weights, so every channel matters to y (as in LLMs).
    let w: Vec<f32> = values(64, 9, 0.4).iter().enumerate().map(|(i, v)| v / gains_of(i / 8)).collect();
    let w = constant(&mut g, "w", &[8, 8], w);
    let y = var(&mut g, "y");
    g.add_operation(Operation::new("MatMul", "matmul"), &[Some(a), Some(w)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    g
}

#[test]
fn smooth_quant_keeps_the_float_output_and_helps_outlier_channels() {
    let input = ("x", &[1usize, 16, 8][..]);
    let mut h = Harness::new(outlier_matmul());
    h.calibration(input.0, input.1, 8);
    h.quantize(&OnnxRuntimeQuantizer::default());
    let feeds = held_out(&h, input.0, input.1, 4);
    let before = h.fp32_over(&feeds);
    let report = h.run_alone(Box::new(SmoothQuant::default()));
    assert_eq!(report.changed, 1, "{report}");
    assert!(max_relative_difference(&before, &h.fp32_over(&feeds)) <= 1e-4);

    let (plain, with) = settings(r#"{"smooth_quant": {"enabled": true}}"#);
    let (base, _) = quantized_snr(outlier_matmul(), input, &OnnxRuntimeQuantizer::default(), &plain);
    let (smoothed, _) = quantized_snr(outlier_matmul(), input, &OnnxRuntimeQuantizer::default(), &with);
    println!("held-out SNR: {base:.2} dB → {smoothed:.2} dB");
    assert!(smoothed >= base + 3.0, "smooth_quant: {base:.2} dB → {smoothed:.2} dB");
    let (_, searched) = settings(r#"{"smooth_quant": {"enabled": true, "alpha_search": true}}"#);
    let (searched_snr, reports) = quantized_snr(outlier_matmul(), input, &OnnxRuntimeQuantizer::default(), &searched);
    let line = reports.iter().find(|r| r.pass == "smooth_quant").unwrap().to_string();
    assert!(line.contains("searched a: α"), "{line}");
    println!("held-out SNR: {base:.2} dB → {searched_snr:.2} dB");
    assert!(searched_snr >= base + 3.0, "smooth_quant with α search: {base:.2} dB → {searched_snr:.2} dB");
    let _ = SmoothQuantSetting::default();
}

/// x[1,4,8,8] → Relu → Conv(4→8, 3×3): positive inputs, so weight rounding shifts the output mean.
fn relu_conv() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let r = unary(&mut g, "Relu", "relu_in", x);
    relu_conv_from(g, r)
}

fn relu_conv_from(mut g: Graph, r: VarId) -> Graph {
    let y = conv_with(&mut g, "conv", r, (vec![8, 4, 3, 3], values(8 * 4 * 9, 5, 0.3)), values(8, 6, 0.1), 1);
    g.add_graph_output(y).unwrap();
    g
}

/// x → Relu → Add 2 → Conv: inputs far from zero mean, as after a ReLU6 or an image offset, so
/// the mean shift of rounded weights dominates their error.
fn offset_relu_conv() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let r = unary(&mut g, "Relu", "relu_in", x);
    let two = constant(&mut g, "two", &[1], vec![2.0]);
    let shifted = var(&mut g, "shifted");
    g.add_operation(Operation::new("Add", "offset"), &[Some(r), Some(two)], &[Some(shifted)]).unwrap();
    relu_conv_from(g, shifted)
}

#[test]
fn bias_correction_removes_the_mean_shift_of_4_bit_weights() {
    let four_bit = LowBitQuantizer { weight_bits: 4, weight_per_channel: false, ..LowBitQuantizer::default() };
    let (plain, with) = settings(r#"{"bias_correction": {"enabled": true}}"#);
    let input = ("x", &[1usize, 4, 8, 8][..]);
    let (base, _) = quantized_snr(offset_relu_conv(), input, &four_bit, &plain);
    let (corrected, reports) = quantized_snr(offset_relu_conv(), input, &four_bit, &with);
    let line = reports.iter().find(|r| r.pass == "bias_correction").unwrap().to_string();
    assert!(line.contains("1 of 1 biases corrected"), "{line}");
    println!("held-out SNR: {base:.2} dB → {corrected:.2} dB");
    assert!(corrected >= base + 3.0, "bias_correction: {base:.2} dB → {corrected:.2} dB");
    let _ = BiasCorrectionSetting::default();
}

/// Heavy-tailed inputs (cubes of uniform values): most values near zero, a few large.
fn heavy_tailed(h: &Harness, n: usize, seed: u64) -> Vec<Feeds> {
    (0..n)
        .map(|i| {
            let v: Vec<f32> = values(4 * 8 * 8, seed + i as u64, 1.0).iter().map(|v| v * v * v).collect();
            vec![("x".to_string(), Value::Tensor(Tensor::from_f32(&[1, 4, 8, 8], v, &h.device)))]
        })
        .collect()
}

#[test]
fn range_search_keeps_the_observer_that_helps_and_reports_it() {
    let four_bit_activations = LowBitQuantizer { weight_bits: 8, activation_bits: 4, ..LowBitQuantizer::default() };
    let run = |setting: &PipelineSetting| {
        let mut h = Harness::new(relu_conv());
        h.batches = heavy_tailed(&h, 8, 50);
        let feeds = heavy_tailed(&h, 4, 500);
        let reference = h.fp32_over(&feeds);
        h.quantize(&four_bit_activations);
        let reports = h.pipeline(setting);
        (snr_db(&reference, &h.sim_over(&feeds)), reports)
    };
    let (base, _) = run(&PipelineSetting { optimize: 0, ..PipelineSetting::default() });
    let setting = PipelineSetting::from_json(
        r#"{"optimize": 0, "range_search": {"enabled": true, "observers": ["mse", "percentile"]}}"#,
    )
    .unwrap();
    let (searched, reports) = run(&setting);
    let lines: Vec<String> = reports.iter().filter(|r| r.pass == "range_search").map(|r| r.to_string()).collect();
    // mse, then percentile at calibration.percentile and at ONNX Runtime's.
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].contains("at p = 0.99999;") && lines[2].contains("at p = 0.999995;"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("kept")), "{lines:?}");
    println!("held-out SNR: {base:.2} dB → {searched:.2} dB");
    assert!(searched >= base + 1.0, "range_search: {base:.2} dB → {searched:.2} dB ({lines:?})");
}

#[test]
fn range_search_tries_each_percentile_and_calibrates_with_the_one_kept() {
    let four_bit_activations = LowBitQuantizer { weight_bits: 8, activation_bits: 4, ..LowBitQuantizer::default() };
    let run = |percentiles: &str| {
        let mut h = Harness::new(relu_conv());
        h.batches = heavy_tailed(&h, 8, 50);
        h.quantize(&four_bit_activations);
        let json = format!(r#"{{"optimize": 0, "range_search": {{"enabled": true, "percentiles": {percentiles}}}}}"#);
        let reports = h.pipeline(&PipelineSetting::from_json(&json).unwrap());
        let lines: Vec<String> = reports.iter().filter(|r| r.pass == "range_search").map(|r| r.to_string()).collect();
        let scales: Vec<Vec<f32>> = mppq_ir::quant::configured_slots(&h.graph)
            .into_iter()
            .filter_map(|loc| mppq_ir::quant::config_at(&h.graph, loc).map(|c| c.scale.clone()))
            .collect();
        (lines, scales)
    };
    // At 4 bits 0.999 beats min/max on the cubes' tail and 0.9 clips far too much: it is undone,
    // and the calibration must go back to the percentile kept before it.
    let (lines, scales) = run("[0.999, 0.9]");
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, p) in lines.iter().zip(["0.999", "0.9"]) {
        assert!(line.contains(&format!("`percentile` observer at p = {p};")), "{lines:?}");
    }
    assert!(lines[0].contains(", kept") && lines[1].contains("no gain: undone"), "{lines:?}");
    let (alone, scales_alone) = run("[0.999]");
    assert!(alone[0].contains(", kept"), "{alone:?}");
    assert_eq!(scales, scales_alone, "calibrated with p = 0.999, the percentile kept");
}

#[test]
fn isotone_calibration_gives_last_axis_softmax_outputs_the_isotone_observer() {
    let (mut g, x) = graph_with_input("x");
    let w = constant(&mut g, "w", &[8, 8], values(64, 3, 0.5));
    let logits = var(&mut g, "logits");
    g.add_operation(Operation::new("MatMul", "fc"), &[Some(x), Some(w)], &[Some(logits)]).unwrap();
    let probs = unary(&mut g, "Softmax", "softmax", logits);
    g.add_graph_output(probs).unwrap();
    let mut h = Harness::new(g);
    h.calibration("x", &[1, 8], 4);
    h.quantize(&per_tensor_int8());
    let report = h.run_alone(Box::new(crate::optimisation::isotone_calibration::IsotoneCalibration));
    assert_eq!(report.changed, 1, "{report}");
    let loc =
        mppq_ir::quant::ConfigLocation { op: h.op("softmax"), side: mppq_ir::quant::ConfigSide::Output, index: 0 };
    assert_eq!(h.config(loc).observer, ObserverKind::Isotone);
}

/// A transform that scales a weight without compensating: it always hurts.
struct Breaker {
    op: &'static str,
    guard: Guard,
}

impl Pass for Breaker {
    fn name(&self) -> &'static str {
        "breaker"
    }
    fn guard(&self) -> Guard {
        self.guard
    }
    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let op = ctx.graph.op_id(self.op).unwrap();
        let mut params = op_params(ctx.graph, op).unwrap();
        let target = if self.guard == Guard::Measure { params.bias.as_mut() } else { params.weight.as_mut() }.unwrap();
        target.values.iter_mut().for_each(|v| *v = *v * 3.0 + 0.5);
        write_param(ctx.graph, target)?;
        Ok(PassReport::new("breaker", 1, "scaled a parameter"))
    }
}

#[test]
fn the_guard_undoes_a_pass_that_lowers_the_output_snr() {
    for guard in [Guard::Recalibrate, Guard::Measure] {
        let mut h = Harness::new(relu_conv());
        h.calibration("x", &[1, 4, 8, 8], 4);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let original = op_params(&h.graph, h.op("conv")).unwrap();
        let mut passes = crate::Pipeline::from_setting(&PipelineSetting { optimize: 0, ..Default::default() }).unwrap();
        let at = if guard == Guard::Measure { passes.len() } else { 0 };
        passes.insert(at, Box::new(Breaker { op: "conv", guard }));
        let mut progress = crate::NoProgress;
        let mut ctx = PassContext::new(&mut h.graph, &h.registry, &h.device, &|_| 17, &h.batches, &mut progress);
        let reports = crate::run_pipeline(&mut ctx, &mut passes).unwrap();
        let breaker = reports.iter().find(|r| r.pass == "breaker").unwrap();
        let outcome = breaker.guard.unwrap();
        assert!(!outcome.kept && outcome.after_db < outcome.before_db, "{guard:?}: {breaker}");
        assert!(breaker.to_string().contains("no gain: undone"), "{breaker}");
        assert_eq!(op_params(&h.graph, h.op("conv")).unwrap(), original, "{guard:?}: parameters not restored");
        // Every config is calibrated: the calibration after the undone transform still counts.
        let (inputs, outputs) = h.sim_applied(&h.input("x", &[1, 4, 8, 8], 0.5));
        assert!(inputs + outputs > 0);
    }
}

#[test]
fn ssd_equalization_finds_the_pair_and_picks_a_scale_that_helps() {
    let (plain, with) = settings(r#"{"ssd_equalization": {"enabled": true}}"#);
    let input = ("x", &[1usize, 4, 8, 8][..]);
    let (base, _) = quantized_snr(unbalanced_conv_pair(), input, &per_tensor_int8(), &plain);
    let (searched, reports) = quantized_snr(unbalanced_conv_pair(), input, &per_tensor_int8(), &with);
    let line = reports.iter().find(|r| r.pass == "ssd_equalization").unwrap().to_string();
    println!("held-out SNR: {base:.2} dB → {searched:.2} dB ({line})");
    assert!(line.contains("1 of 1 pairs rescaled"), "{line}");
    assert!(searched >= base + 6.0, "ssd_equalization: {base:.2} dB → {searched:.2} dB");
}

/// x[1,4,8,8] → Conv(4→8) → Relu → Conv(8→8): input channel 3 of the second Conv holds weights
/// 30× the others, and the first Conv's channel 3 is 30× smaller, so every channel matters to the
/// output the same while the second weight's per-tensor range is set by the outliers.
fn outlier_conv_pair() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let boost = |c: usize| if c == 3 { 30.0 } else { 1.0 };
    let w1: Vec<f32> = values(8 * 4 * 9, 11, 0.3).iter().enumerate().map(|(i, v)| v / boost(i / 36)).collect();
    let b1: Vec<f32> = values(8, 12, 0.2).iter().enumerate().map(|(c, v)| v / boost(c)).collect();
    let h = conv_with(&mut g, "conv1", x, (vec![8, 4, 3, 3], w1), b1, 1);
    let r = unary(&mut g, "Relu", "relu", h);
    let w2: Vec<f32> = values(8 * 8 * 9, 13, 0.3).iter().enumerate().map(|(i, v)| v * boost((i / 9) % 8)).collect();
    let y = conv_with(&mut g, "conv2", r, (vec![8, 8, 3, 3], w2), values(8, 14, 0.2), 1);
    g.add_graph_output(y).unwrap();
    g
}

#[test]
fn channel_split_keeps_the_float_output_and_helps_outlier_weights() {
    let mut h = Harness::new(outlier_conv_pair());
    h.calibration("x", &[1, 4, 8, 8], 8);
    let feeds = held_out(&h, "x", &[1, 4, 8, 8], 4);
    let before = h.fp32_over(&feeds);
    let report = h.run_alone(Box::new(crate::optimisation::channel_split::ChannelSplit::default()));
    assert!(report.to_string().contains("3 channels split in 1 of 1"), "{report}");
    assert_eq!(op_params(&h.graph, h.op("conv1")).unwrap().weight.unwrap().shape, [11, 4, 3, 3]);
    assert_eq!(op_params(&h.graph, h.op("conv2")).unwrap().weight.unwrap().shape, [8, 11, 3, 3]);
    assert!(max_relative_difference(&before, &h.fp32_over(&feeds)) <= 1e-4);

    let (plain, with) = settings(r#"{"channel_split": {"enabled": true}}"#);
    let input = ("x", &[1usize, 4, 8, 8][..]);
    let (base, _) = quantized_snr(outlier_conv_pair(), input, &per_tensor_int8(), &plain);
    let (split, _) = quantized_snr(outlier_conv_pair(), input, &per_tensor_int8(), &with);
    println!("held-out SNR: {base:.2} dB → {split:.2} dB");
    assert!(split >= base + 2.0, "channel_split: {base:.2} dB → {split:.2} dB");
}
