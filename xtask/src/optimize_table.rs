//! `cargo xtask optimize-table`: what each optimisation pass and each `--optimize` level buys,
//! measured the way a user would see it. For each testdata model (and ResNet-18 with
//! `--resnet18`), and for `tiny_mobilenet` also with per-tensor int8 weights (`lowbit`), quantize
//! with every variant (level 0, level 1 = the default, level 1 plus one pass, level 2) on the
//! first 4 calibration batches, export QDQ, run the export in ONNX Runtime on the other 4 batches
//! (held out: never seen by calibration or the guard) and compare with ONNX Runtime's run of the
//! original float model. Prints a Markdown table (and writes JSON with `--json`).

use anyhow::{Context, Result, bail};
use mppq_api::QuantizeSetting;
use mppq_quant::metrics::snr_db;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::proto::workspace_root;

pub struct Options {
    pub resnet18: bool,
    pub json: Option<PathBuf>,
}

/// Calibration batches used; the rest are held out for evaluation.
const CALIBRATION_BATCHES: usize = 4;

/// One way of quantizing.
struct Variant {
    name: &'static str,
    apply: fn(&mut QuantizeSetting),
}

const VARIANTS: &[Variant] = &[
    Variant { name: "level 0 (calibration only)", apply: |s| s.pipeline.optimize = 0 },
    Variant { name: "level 1 (default)", apply: |s| s.pipeline.optimize = 1 },
    Variant { name: "level 1 + equalization", apply: |s| s.pipeline.equalization.enabled = Some(true) },
    Variant { name: "level 1 + ssd_equalization", apply: |s| s.pipeline.ssd_equalization.enabled = Some(true) },
    Variant { name: "level 1 + channel_split", apply: |s| s.pipeline.channel_split.enabled = Some(true) },
    Variant { name: "level 1 + smooth_quant", apply: |s| s.pipeline.smooth_quant.enabled = Some(true) },
    Variant { name: "level 1 + range_search", apply: |s| s.pipeline.range_search.enabled = Some(true) },
    Variant { name: "level 1 + bias_correction", apply: |s| s.pipeline.bias_correction.enabled = Some(true) },
    Variant { name: "level 2", apply: |s| s.pipeline.optimize = 2 },
];

#[derive(Debug, Serialize)]
pub struct Row {
    pub model: String,
    pub variant: String,
    /// ORT run of the QDQ export vs ORT run of the float model, held-out batches.
    pub snr_ort_db: f64,
    /// Wall time of `quantize` (load excluded), and of the optimisation passes in it.
    pub quantize_s: f64,
    pub optimisation_s: f64,
    /// Guarded passes that changed something: kept or undone, with the SNR change the guard
    /// measured on the calibration batches.
    pub guarded: String,
}

fn batch_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "npz" || e == "npy"))
        .collect();
    files.sort();
    Ok(files)
}

/// Runs `model` in ONNX Runtime on `files`; returns every float output, concatenated per batch.
fn ort_outputs(python: &Path, model: &Path, files: &[PathBuf], dir: &Path) -> Result<Vec<f32>> {
    let status = Command::new(python)
        .arg(crate::pyenv::script("ort_qdq.py"))
        .arg(model)
        .arg(dir)
        .args(files)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running ort_qdq.py")?;
    if !status.success() {
        bail!("ONNX Runtime failed on {}", model.display());
    }
    let mut all = Vec::new();
    for i in 0..files.len() {
        for (_, t) in mppq_api::npy::read_npz(&dir.join(format!("ort_{i:03}.npz")))? {
            if let Ok(v) = t.to_f32_vec() {
                all.extend(v);
            }
        }
    }
    Ok(all)
}

/// What one variant gave.
struct Outcome {
    /// ORT's outputs of the QDQ export on the held-out batches.
    outputs: Vec<f32>,
    quantize_s: f64,
    optimisation_s: f64,
    guarded: String,
}

fn quantize_variant(
    model: &Path,
    calib: &Path,
    base: &QuantizeSetting,
    variant: &Variant,
    held_out: &[PathBuf],
    python: &Path,
) -> Result<Outcome> {
    let mut setting = base.clone();
    (variant.apply)(&mut setting);
    setting.exporters = Some(vec!["qdq".into()]);
    setting.pipeline.calibration.steps = Some(CALIBRATION_BATCHES);
    let mut q = mppq_api::load_quantizer(model, setting)?;
    let data = mppq_api::CalibrationSet::from_path(&q.model, calib, Some(CALIBRATION_BATCHES))?;
    let started = Instant::now();
    q.quantize(&data, &mut mppq_api::passes::NoProgress)?;
    let quantize_s = started.elapsed().as_secs_f64();
    let is_optimisation = |pass: &str| mppq_api::passes::PASS_LEVELS.iter().any(|(n, _)| *n == pass);
    let optimisation_s = q.reports.iter().filter(|r| is_optimisation(r.pass)).map(|r| r.seconds).sum();
    let guarded: Vec<String> = q
        .reports
        .iter()
        .filter_map(|r| {
            let g = r.guard?;
            Some(format!("{} {} ({:+.2})", r.pass, if g.kept { "kept" } else { "undone" }, g.after_db - g.before_db))
        })
        .collect();
    let dir = tempfile::tempdir()?;
    let artifacts = q.export_to(dir.path())?;
    let [artifact] = artifacts.as_slice() else { bail!("the qdq exporter wrote {} files", artifacts.len()) };
    let outputs = ort_outputs(python, &artifact.path, held_out, &dir.path().join("ort"))?;
    Ok(Outcome { outputs, quantize_s, optimisation_s, guarded: guarded.join(", ") })
}

pub fn run(opts: &Options) -> Result<()> {
    let python = crate::pyenv::python()?;
    let root = workspace_root();
    let mut models: Vec<(String, PathBuf, PathBuf, QuantizeSetting)> = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(root.join("testdata"))?
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .filter(|n| root.join(format!("testdata/{n}.onnx")).exists())
        .collect();
    names.sort();
    names.dedup();
    // As qdq-check: ORT computes 8-bit weights exactly only with VNNI.
    let mut default = QuantizeSetting::default();
    if !mppq_exec::cpu::has_vnni() {
        default.quantizer.reduce_range = Some(true);
    }
    for n in names {
        let (model, calib) = (root.join(format!("testdata/{n}.onnx")), root.join(format!("testdata/{n}_calib")));
        if n == "tiny_mobilenet" {
            let mut per_tensor = QuantizeSetting { platform: "lowbit".into(), ..QuantizeSetting::default() };
            per_tensor.quantizer.bits = Some(8);
            per_tensor.quantizer.weight_bits = Some(8);
            per_tensor.quantizer.per_channel = Some(false);
            models.push((format!("{n}, per-tensor w8"), model.clone(), calib.clone(), per_tensor));
        }
        models.push((n, model, calib, default.clone()));
    }
    if opts.resnet18 {
        let (model, calib) = crate::bench::ensure_resnet18()?;
        models.push(("resnet18".into(), model, calib, default.clone()));
    }
    println!(
        "this CPU {} VNNI; calibration on {CALIBRATION_BATCHES} batches, SNR on the others",
        if mppq_exec::cpu::has_vnni() { "has" } else { "lacks (7-bit weights)" }
    );
    println!(
        "| model | variant | SNR, ORT, held-out (dB) | Δ vs level 1 | quantize (s) | passes (s) | guarded passes |"
    );
    println!("|---|---|---:|---:|---:|---:|---|");
    let mut rows = Vec::new();
    for (name, model, calib, base) in &models {
        let files = batch_files(calib)?;
        if files.len() <= CALIBRATION_BATCHES {
            bail!("{name}: {} batches, need more than {CALIBRATION_BATCHES}", files.len());
        }
        let held_out = &files[CALIBRATION_BATCHES..];
        let dir = tempfile::tempdir()?;
        let reference = ort_outputs(&python, model, held_out, dir.path())?;
        let mut level_one = f64::NAN;
        for variant in VARIANTS {
            let outcome =
                quantize_variant(model, calib, base, variant, held_out, &python).with_context(|| name.clone())?;
            if outcome.outputs.len() != reference.len() {
                bail!(
                    "{name}: {} output values from the export, {} from the float model",
                    outcome.outputs.len(),
                    reference.len()
                );
            }
            let snr = snr_db(&reference, &outcome.outputs);
            if variant.name.starts_with("level 1 (") {
                level_one = snr;
            }
            println!(
                "| {name} | {} | {snr:.2} | {:+.2} | {:.2} | {:.2} | {} |",
                variant.name,
                snr - level_one,
                outcome.quantize_s,
                outcome.optimisation_s,
                outcome.guarded
            );
            rows.push(Row {
                model: name.clone(),
                variant: variant.name.into(),
                snr_ort_db: snr,
                quantize_s: outcome.quantize_s,
                optimisation_s: outcome.optimisation_s,
                guarded: outcome.guarded,
            });
        }
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}
