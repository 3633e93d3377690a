//! `--optimize` levels and the accuracy budget, end to end on the testdata models.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::QuantizeSetting;
use mppq_api::quantize::{JobSummary, analyse_model};
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn job(model: &str, setting: QuantizeSetting) -> JobSummary {
    let dir = testdata();
    let (path, calib) = (dir.join(format!("{model}.onnx")), dir.join(format!("{model}_calib")));
    analyse_model(&path, &calib, setting, None, None, &mut mppq_api::passes::NoProgress).unwrap()
}

/// The outputs' SNR as the guard and the budget measure it: −10·log10 of the mean noise-to-signal
/// ratio of the graph outputs.
fn output_snr(job: &JobSummary) -> f64 {
    mppq_quant::metrics::mean_snr_db(job.analysis.as_ref().unwrap().outputs().map(|t| 10f64.powf(-t.snr_db / 10.0)))
}

fn at_level(level: u8) -> QuantizeSetting {
    let mut s = QuantizeSetting::default();
    s.pipeline.optimize = level;
    s.analysis.batches = Some(8);
    s
}

#[test]
fn level_2_is_never_worse_than_level_1_and_every_pass_says_what_it_did() {
    for model in ["tiny_cnn", "detect_branch", "tiny_transformer"] {
        let (one, two) = (job(model, at_level(1)), job(model, at_level(2)));
        let (a, b) = (output_snr(&one), output_snr(&two));
        println!("{model}: level 1 {a:.2} dB, level 2 {b:.2} dB");
        assert!(b >= a - 0.01, "{model}: level 2 {b:.2} dB < level 1 {a:.2} dB");
        for pass in ["equalization", "smooth_quant", "range_search", "bias_correction"] {
            assert!(two.pass_reports.iter().any(|r| r.starts_with(pass)), "{model}: no report of {pass}");
        }
        for pass in ["equalization", "bias_correction"] {
            assert!(!one.pass_reports.iter().any(|r| r.starts_with(pass)), "{model}: {pass} ran at level 1");
        }
        // SmoothQuant joins level 1 for transformer graphs only.
        let smoothed_at_1 =
            one.pass_reports.iter().any(|r| r.starts_with("smooth_quant") && !r.contains("no attention"));
        assert_eq!(smoothed_at_1, model == "tiny_transformer", "{model}: {:?}", one.pass_reports);
        // Level 1 tries the percentile observer at two percentiles, level 2 also mse.
        let searched = |job: &mppq_api::quantize::JobSummary| {
            job.pass_reports.iter().filter(|r| r.starts_with("range_search")).count()
        };
        assert_eq!((searched(&one), searched(&two)), (2, 3), "{model}");
    }
}

#[test]
fn the_accuracy_budget_reaches_its_target_and_reports_each_operation() {
    let mut setting = at_level(1);
    setting.budget.target_snr = Some(50.0);
    let done = job("tiny_cnn", setting);
    let budget = done.budget.as_ref().unwrap();
    assert!(budget.met && budget.final_db >= 50.0, "{budget}");
    assert!(!budget.given_back.is_empty() && budget.start_db < 50.0, "{budget}");
    for g in &budget.given_back {
        assert!(g.snr_after_db > g.snr_before_db, "{budget}");
    }
    // The operations given back are no longer quantized, and the analysis agrees with the budget.
    let plain = job("tiny_cnn", at_level(1));
    assert_eq!(done.quantized_ops.0 + budget.given_back.len(), plain.quantized_ops.0, "{budget}");
    assert!((output_snr(&done) - budget.final_db).abs() < 0.01, "{budget}");

    let mut capped = at_level(1);
    capped.budget.max_float_ops = Some(1);
    capped.budget.target_snr = Some(80.0);
    let done = job("tiny_cnn", capped);
    let budget = done.budget.as_ref().unwrap();
    assert!(budget.given_back.len() == 1 && !budget.met, "{budget}");
    assert!(budget.to_string().contains("NOT met"), "{budget}");
}

#[test]
fn an_unavailable_level_and_a_bad_target_are_refused_up_front() {
    let dir = testdata();
    let mut s = QuantizeSetting::default();
    s.pipeline.optimize = 4;
    let err = mppq_api::load_quantizer(&dir.join("tiny_cnn.onnx"), s).err().unwrap().to_string();
    assert!(err.contains("optimize = 4"), "{err}");
    let mut s = QuantizeSetting::default();
    s.budget.target_snr = Some(f64::NAN);
    let err = mppq_api::load_quantizer(&dir.join("tiny_cnn.onnx"), s).err().unwrap().to_string();
    assert!(err.contains("budget.target_snr"), "{err}");
}

#[test]
fn equalization_gains_3_db_on_a_depthwise_cnn_with_per_tensor_int8_weights() {
    let per_tensor = |level: u8| {
        let mut s = at_level(level);
        s.platform = "lowbit".into();
        s.quantizer.bits = Some(8);
        s.quantizer.weight_bits = Some(8);
        s.quantizer.per_channel = Some(false);
        s.pipeline.range_search.enabled = Some(false);
        s.pipeline.bias_correction.enabled = Some(false);
        s
    };
    let (one, two) = (job("tiny_mobilenet", per_tensor(1)), job("tiny_mobilenet", per_tensor(2)));
    let (a, b) = (output_snr(&one), output_snr(&two));
    println!("tiny_mobilenet, per-tensor int8 weights: level 1 {a:.2} dB, with equalization {b:.2} dB");
    let line = two.pass_reports.iter().find(|r| r.starts_with("equalization")).unwrap();
    assert!(line.contains("kept"), "{line}");
    assert!(b >= a + 3.0, "equalization: {a:.2} → {b:.2} dB");
    // The search-based variant finds the same pairs (blocks cut from a fused, configured graph).
    let mut ssd = per_tensor(1);
    ssd.pipeline.ssd_equalization.enabled = Some(true);
    let ssd = job("tiny_mobilenet", ssd);
    let c = output_snr(&ssd);
    let line = ssd.pass_reports.iter().find(|r| r.starts_with("ssd_equalization")).unwrap();
    println!("with ssd_equalization {c:.2} dB: {line}");
    assert!(line.contains("kept") && c >= a + 3.0, "ssd_equalization: {a:.2} → {c:.2} dB: {line}");
}

#[test]
fn the_analysis_runs_a_second_float_model_only_when_passes_changed_the_float_graph() {
    let dir = testdata();
    for (level, second) in [(1, false), (2, true)] {
        let mut q = mppq_api::load_quantizer(&dir.join("tiny_cnn.onnx"), at_level(level)).unwrap();
        let progress = &mut mppq_api::passes::NoProgress;
        let calib = mppq_api::quantize::open_calibration(&q, &dir.join("tiny_cnn_calib"), progress).unwrap();
        q.quantize(&calib, progress).unwrap();
        // Level 1 changes quantization configs only; level 2's equalization rescales weights.
        assert_eq!(q.reference_executor().unwrap().is_some(), second, "level {level}");
    }
}
