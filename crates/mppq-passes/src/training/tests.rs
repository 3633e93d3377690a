//! Tests of the training passes on graphs where they must help, measured on held-out inputs
//! against round-to-nearest at the same bit widths (unguarded, so each pass's own effect shows).

use crate::PipelineSetting;
use crate::test_graphs::{Feeds, Harness, conv, graph_with_input, snr_db, unary, values};
use crate::training::reconstruction::{BlockKind, find_blocks};
use mppq_exec::{Tensor, Value};
use mppq_ir::Graph;
use mppq_quant::quantizer::LowBitQuantizer;

/// x[1,8,8,8] → Conv(8→16, 3×3) → y.
fn single_conv() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let y = conv(&mut g, "conv", x, 8, 16, 3);
    g.add_graph_output(y).unwrap();
    g
}

/// x[1,8,8,8] → Conv(8→8) → Relu → Conv(8→8) → y.
fn two_convs() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let h = conv(&mut g, "conv1", x, 8, 8, 5);
    let r = unary(&mut g, "Relu", "relu", h);
    let y = conv(&mut g, "conv2", r, 8, 8, 9);
    g.add_graph_output(y).unwrap();
    g
}

const INPUT: (&str, [usize; 4]) = ("x", [1, 8, 8, 8]);

/// An input whose channels are correlated, as image features are (two latent channels mixed
/// into eight, plus a little noise): where learned rounding can beat rounding to nearest (with
/// independent inputs, rounding to nearest already minimises the expected output error).
fn correlated(h: &Harness, seed: u64) -> Feeds {
    let latent = values(2 * 64, seed, 1.0);
    let noise = values(8 * 64, seed + 77, 0.1);
    let mix = values(16, 4242, 1.0);
    let x: Vec<f32> = (0..8 * 64)
        .map(|i| mix[(i / 64) * 2] * latent[i % 64] + mix[(i / 64) * 2 + 1] * latent[64 + i % 64] + noise[i])
        .collect();
    vec![(INPUT.0.to_string(), Value::Tensor(Tensor::from_f32(&INPUT.1, x, &h.device)))]
}

/// Held-out SNR (dB) of `graph` at `weight_bits` with `json`'s passes, calibrated on 16 batches.
fn held_out_snr(graph: Graph, weight_bits: u32, json: &str) -> (f64, String) {
    let mut setting = PipelineSetting::from_json(json).unwrap();
    setting.optimize = 0;
    setting.guard.enabled = false;
    let mut h = Harness::new(graph);
    h.batches = (0..16).map(|i| correlated(&h, i)).collect();
    let feeds: Vec<Feeds> = (0..6).map(|i| correlated(&h, 1000 + i)).collect();
    let reference = h.fp32_over(&feeds);
    h.quantize(&LowBitQuantizer { weight_bits, ..LowBitQuantizer::default() });
    let reports = h.pipeline(&setting);
    let lines: Vec<String> = reports.iter().map(ToString::to_string).collect();
    (snr_db(&reference, &h.sim_over(&feeds)), lines.join("\n"))
}

#[test]
fn adaround_beats_round_to_nearest_on_a_4_bit_conv() {
    let (rtn, _) = held_out_snr(single_conv(), 4, "{}");
    let (ada, report) = held_out_snr(single_conv(), 4, r#"{"adaround": {"enabled": true}}"#);
    println!("4-bit Conv, held-out SNR: round-to-nearest {rtn:.2} dB, AdaRound {ada:.2} dB\n{report}");
    assert!(report.contains("1 of 1 blocks improved"), "{report}");
    assert!(ada >= rtn + 3.0, "AdaRound {ada:.2} dB vs round-to-nearest {rtn:.2} dB");
}

#[test]
fn round_tuning_beats_round_to_nearest_on_a_4_bit_conv() {
    let (rtn, _) = held_out_snr(single_conv(), 4, "{}");
    let (tuned, report) = held_out_snr(single_conv(), 4, r#"{"round_tuning": {"enabled": true}}"#);
    println!("4-bit Conv, held-out SNR: round-to-nearest {rtn:.2} dB, round tuning {tuned:.2} dB\n{report}");
    assert!(report.contains("1 of 1 blocks improved"), "{report}");
    assert!(tuned >= rtn + 2.5, "round tuning {tuned:.2} dB vs round-to-nearest {rtn:.2} dB");
}

#[test]
fn block_reconstruction_beats_layer_wise_adaround_on_the_same_budget() {
    // 250 steps per layer (two layers) against 500 steps on the two-layer block.
    let (rtn, _) = held_out_snr(two_convs(), 3, "{}");
    let (ada, a) = held_out_snr(two_convs(), 3, r#"{"adaround": {"enabled": true, "steps": 250}}"#);
    // BRECQ as published (QDrop's drop and learned activation scales off).
    let brecq_only =
        r#"{"block_reconstruction": {"enabled": true, "steps": 500, "drop": 0, "activation_scale": false}}"#;
    let (brecq, b) = held_out_snr(two_convs(), 3, brecq_only);
    let qdrop_form =
        r#"{"block_reconstruction": {"enabled": true, "steps": 500, "drop": 0.5, "activation_scale": true}}"#;
    let (qdrop, _) = held_out_snr(two_convs(), 3, qdrop_form);
    println!(
        "3-bit Conv→Relu→Conv: round-to-nearest {rtn:.2}, AdaRound {ada:.2}, block {brecq:.2}, QDrop {qdrop:.2} dB\n{a}\n{b}"
    );
    assert!(b.contains("conv1+conv2"), "one block of both convolutions: {b}");
    assert!(ada > rtn && brecq >= ada, "round-to-nearest {rtn:.2}, AdaRound {ada:.2}, block {brecq:.2} dB");
    assert!(qdrop > rtn + 1.0, "QDrop {qdrop:.2} dB vs round-to-nearest {rtn:.2} dB");
}

#[test]
fn blocks_are_cut_where_one_value_is_live() {
    let mut h = Harness::new(two_convs());
    h.batches = (0..2).map(|i| correlated(&h, i)).collect();
    h.quantize(&LowBitQuantizer::default());
    h.pipeline(&PipelineSetting { optimize: 0, ..PipelineSetting::default() });
    let blocks = find_blocks(&h.graph, BlockKind::Block, 1).unwrap();
    let cuts: Vec<(Vec<String>, Vec<String>, Vec<String>)> =
        blocks.iter().map(|b| (b.inputs.clone(), b.outputs.clone(), b.ops.clone())).collect();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        cuts,
        vec![
            // The fused Relu stays with its Conv.
            (s(&["x"]), s(&["relu.out"]), s(&["conv1"])),
            (s(&["relu.out"]), s(&["conv2.out"]), s(&["conv2"])),
        ]
    );
    let layers = find_blocks(&h.graph, BlockKind::Layer, 4).unwrap();
    assert_eq!(layers[0].outputs, s(&["relu.out"]));
}

#[test]
fn lsq_fine_tuning_beats_round_to_nearest_on_2_bit_weights() {
    let (rtn, _) = held_out_snr(two_convs(), 2, "{}");
    let (lsq, report) = held_out_snr(two_convs(), 2, r#"{"lsq": {"enabled": true}}"#);
    println!("2-bit Conv→Relu→Conv: round-to-nearest {rtn:.2} dB, LSQ {lsq:.2} dB\n{report}");
    assert!(lsq >= rtn + 1.0, "LSQ {lsq:.2} dB vs round-to-nearest {rtn:.2} dB");
}

#[test]
fn the_cache_bound_holds_when_block_inputs_would_not_fit() {
    // x[1,8,64,64]: 128 KiB per batch, 16 batches = 2 MiB of inputs (and as much of targets); a
    // 1 MiB bound caches 8 of them, evenly spaced.
    let mut h = Harness::new(single_conv());
    h.batches = (0..16).map(|i| h.input("x", &[1, 8, 64, 64], i as f32)).collect();
    h.quantize(&LowBitQuantizer::default());
    let mut setting =
        PipelineSetting::from_json(r#"{"adaround": {"enabled": true, "steps": 20, "cache_mib": 1}}"#).unwrap();
    setting.optimize = 0;
    setting.guard.enabled = false;
    let reports = h.pipeline(&setting);
    let line = reports.iter().find(|r| r.pass == "adaround").unwrap().to_string();
    assert!(line.contains("8 of 16 batches cached"), "{line}");
}
