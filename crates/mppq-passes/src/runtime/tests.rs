//! Tests of the pass runtime: declared statistics come from one run over the data per graph
//! mode, and a block run from cached inputs equals the same operations in the full graph.

use crate::error::Result;
use crate::runtime::block::BlockRunner;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::progress::NoProgress;
use crate::runtime::statistics::{GraphMode, StatRequest, Statistic, Statistics};
use crate::test_graphs::{Feeds, Harness, conv_relu_conv};
use crate::{op_params, run_pipeline, write_param};
use mppq_exec::{Device, Executor};
use mppq_ir::Graph;
use mppq_quant::CalibrationData;
use mppq_quant::quantizer::OnnxRuntimeQuantizer;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Calibration data that counts how often a batch is handed out.
struct Counting<'a> {
    batches: &'a [Feeds],
    served: Cell<usize>,
}

impl CalibrationData for Counting<'_> {
    fn batch_count(&self) -> usize {
        self.batches.len()
    }
    fn batch(&self, index: usize, device: &Device) -> std::result::Result<Feeds, String> {
        self.served.set(self.served.get() + 1);
        self.batches.batch(index, device)
    }
}

/// A pass that declares statistics of two variables on both graphs and keeps what it got.
struct Probe {
    got: Rc<RefCell<Statistics>>,
}

impl Pass for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn statistics(&self, graph: &Graph) -> Result<Vec<StatRequest>> {
        let (relu, out) = (graph.var_id("relu.out").unwrap(), graph.var_id("conv2.out").unwrap());
        Ok(vec![
            StatRequest::new(relu, Statistic::Range, GraphMode::Float),
            StatRequest::new(relu, Statistic::ChannelMean { axis: 1 }, GraphMode::Float),
            StatRequest::new(out, Statistic::ChannelRange { axis: 1 }, GraphMode::Float),
            StatRequest::new(out, Statistic::Range, GraphMode::Simulated),
        ])
    }
    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        *self.got.borrow_mut() = std::mem::take(&mut ctx.statistics);
        Ok(PassReport::new(self.name(), 0, "probed"))
    }
}

/// The values of `names` for every batch, computed directly from the full graph.
fn reference(h: &Harness, names: &[&str]) -> Vec<Vec<Vec<f32>>> {
    let exec = Executor::new(&h.graph, &h.registry, &h.device, &|_| 17).unwrap();
    let wanted: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    h.batches
        .iter()
        .map(|b| {
            let out = exec.run_until(b.clone(), &wanted, &mut []).unwrap();
            out.iter().map(|(_, v)| v.as_tensor().unwrap().to_f32_vec()).collect()
        })
        .collect()
}

#[test]
fn declared_statistics_are_collected_in_one_run_per_graph_mode() {
    let mut h = Harness::new(conv_relu_conv());
    h.calibration("x", &[1, 2, 4, 4], 3);
    h.quantize(&OnnxRuntimeQuantizer::default());
    h.pipeline(&crate::PipelineSetting::default());
    let data = Counting { batches: &h.batches, served: Cell::new(0) };
    let got = Rc::new(RefCell::new(Statistics::default()));
    let mut probe: Vec<Box<dyn Pass>> = vec![Box::new(Probe { got: got.clone() })];
    let mut progress = NoProgress;
    let registry = h.registry.clone();
    let mut ctx = PassContext::new(&mut h.graph, &registry, &h.device, &|_| 17, &data, &mut progress);
    run_pipeline(&mut ctx, &mut probe).unwrap();
    // Four statistics of two variables on two graphs: one pass over the 3 batches per graph.
    assert_eq!(data.served.get(), 2 * 3);
    let relu_vals = reference(&h, &["relu.out"]);
    let all: Vec<f32> = relu_vals.iter().flat_map(|b| b[0].clone()).collect();
    let (lo, hi) = all.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, u), v| (l.min(*v), u.max(*v)));
    // Channel means over [1, 3, 4, 4] per batch: 16 values per channel per batch.
    let mut means = [0f64; 3];
    for b in &relu_vals {
        for (i, v) in b[0].iter().enumerate() {
            means[(i / 16) % 3] += f64::from(*v) / (16.0 * 3.0);
        }
    }
    let got = got.borrow();
    let relu = h.graph.var_id("relu.out").unwrap();
    assert_eq!(got.range(relu, GraphMode::Float), Some((lo, hi)));
    let m = got.channel_means(relu, 1, GraphMode::Float).unwrap();
    for (a, b) in m.iter().zip(means) {
        assert!((f64::from(*a) - b).abs() < 1e-5, "{a} vs {b}");
    }
    let out = h.graph.var_id("conv2.out").unwrap();
    assert_eq!(got.channel_ranges(out, 1, GraphMode::Float).unwrap().len(), 3);
    // The simulated graph's output differs from the float one (it is quantized) but stays close.
    let (slo, shi) = got.range(out, GraphMode::Simulated).unwrap();
    let fl = got.channel_ranges(out, 1, GraphMode::Float).unwrap();
    let (flo, fhi) = fl.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, u), r| (l.min(r.0), u.max(r.1)));
    assert!((slo - flo).abs() < 0.1 && (shi - fhi).abs() < 0.1, "{slo}..{shi} vs {flo}..{fhi}");
    assert_eq!(got.batches_run.get(&GraphMode::Simulated), Some(&3));
}

#[test]
fn a_block_run_from_cached_inputs_equals_the_full_graph() {
    let mut h = Harness::new(conv_relu_conv());
    h.calibration("x", &[1, 2, 4, 4], 4);
    let full = reference(&h, &["relu.out", "conv2.out"]);
    let mut progress = NoProgress;
    let registry = h.registry.clone();
    let batches = h.batches.clone();
    let mut ctx = PassContext::new(&mut h.graph, &registry, &h.device, &|_| 17, &batches, &mut progress);
    let block =
        BlockRunner::new(&mut ctx, "test", &["relu.out"], &["conv2.out"], GraphMode::Float, usize::MAX).unwrap();
    assert_eq!(block.batches, [0, 1, 2, 3]);
    let types: Vec<_> = block.graph.operations().map(|(_, o)| o.op_type.as_str()).collect();
    assert_eq!(types, ["Conv"], "only conv2 lies between the cuts");
    for (entry, batch) in block.batches.iter().enumerate() {
        let out = block.run(entry, &mut []).unwrap();
        assert_eq!(out[0].0, "conv2.out");
        assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), full[*batch][1], "batch {batch}");
    }
    // A cache bound of two entries keeps two evenly spaced batches.
    let entry_bytes = block.cached_bytes / 4;
    let small =
        BlockRunner::new(&mut ctx, "test", &["relu.out"], &["conv2.out"], GraphMode::Float, 2 * entry_bytes).unwrap();
    assert_eq!(small.batches, [0, 2]);
    assert!(small.cached_bytes <= 2 * entry_bytes);
    // A cut that leaves an input of the block uncomputed is refused, naming it.
    let err = BlockRunner::new(&mut ctx, "test", &[], &["conv2.out"], GraphMode::Float, usize::MAX);
    assert!(err.err().unwrap().to_string().contains("`x`"));
}

#[test]
fn weights_by_role_are_written_back_and_change_the_output() {
    let mut h = Harness::new(conv_relu_conv());
    h.calibration("x", &[1, 2, 4, 4], 1);
    let before = h.run_fp32(&h.batches[0].clone());
    let conv2 = h.op("conv2");
    let params = op_params(&h.graph, conv2).unwrap();
    let (mut w, mut b) = (params.weight.unwrap(), params.bias.unwrap());
    assert_eq!((w.shape.as_slice(), w.channel_axis, w.channels()), (&[3, 3, 3, 3][..], Some(0), 3));
    // Output channel c scaled by s_c: weight and bias of channel c scaled together.
    let factors = [2.0, 0.5, 1.0];
    w.scale_channels(&factors).unwrap();
    b.scale_channels(&factors).unwrap();
    assert!(w.scale_channels(&[1.0, 2.0]).is_err(), "one factor per channel");
    write_param(&mut h.graph, &w).unwrap();
    write_param(&mut h.graph, &b).unwrap();
    let after = h.run_fp32(&h.batches[0].clone());
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        let s = factors[(i / 16) % 3];
        assert!((a * s - b).abs() < 1e-5, "element {i}: {a} * {s} vs {b}");
    }
}
