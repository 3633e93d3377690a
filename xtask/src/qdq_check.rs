//! `cargo xtask qdq-check`: the proof that a QDQ export computes what our simulation computes.
//! For each testdata model (and ResNet-18 with `--resnet18`): quantize exactly as `mppq quantize`
//! does (the setting's platform and pass pipeline, 8 calibration batches), export QDQ, run
//! the export in ONNX Runtime (default optimisations: fused integer kernels) and in our own
//! executor, run the fake-quant simulation, and compare on the calibration batches.

use anyhow::{Context, Result, anyhow, bail};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::quant::TensorQuantConfig;
use mppq_ir::{Graph, VarId};
use mppq_quant::metrics::snr_db;
use serde::Serialize;
use std::path::{Path, PathBuf};

use crate::cpu_lane::CpuLane;
use crate::proto::workspace_root;

/// Targets of the check.
pub const MIN_AGREEMENT: f64 = 99.9;
pub const MAX_DELTA_SNR_DB: f64 = 0.1;
/// ORT's SNR against float when nothing is quantized (float rounding only).
const FLOAT_ONLY_MIN_SNR_DB: f64 = 100.0;

pub struct Options {
    pub models: Vec<String>,
    /// Also check the ResNet-18 model (generated into target/bench on first use).
    pub resnet18: bool,
    pub json: Option<PathBuf>,
    /// The quantization setting (platform, pipeline knobs); the defaults when `None`.
    pub setting: Option<PathBuf>,
    /// Overrides the setting's platform.
    pub platform: Option<String>,
    /// ORT graph optimisation level: all (default), basic, none.
    pub ort_opt: String,
    /// The runtime the export runs in: `ort` (ONNX Runtime) or `openvino`.
    pub runtime: String,
    /// Print the table but exit 0 on a miss (a runtime whose kernels the simulation does not
    /// model exactly; its misses are findings to read, not regressions).
    pub report_only: bool,
    /// The CPU classes ORT runs the export on (`crate::cpu_lane`); each gives a row per model.
    /// Empty: the host's.
    pub lanes: Vec<CpuLane>,
}

impl Options {
    /// The lanes to run: those asked for, or the host's.
    fn lanes(&self) -> Vec<CpuLane> {
        if self.lanes.is_empty() { vec![CpuLane::Host] } else { self.lanes.clone() }
    }
}

#[derive(Debug, Serialize)]
pub struct ModelResult {
    pub model: String,
    /// The CPU class ORT ran on (`host (x86-vnni)`, `x86-avx2 (qemu Haswell)`).
    pub cpu: String,
    pub elements: usize,
    /// % of output elements of ORT within one output quantization step of the simulation.
    pub agreement_pct: f64,
    pub snr_ort_db: f64,
    pub snr_sim_db: f64,
    pub delta_snr_db: f64,
    /// Our executor on the exported model (convolutions fused into QLinearConv, the rest in
    /// float) vs the simulation with integer convolutions only: % within one step.
    pub ours_agreement_pct: f64,
    pub snr_ours_db: f64,
    pub max_diff_steps: f64,
    pub pass: bool,
}

/// The `batch_*.npz` files of `dir`, sorted (an error when there are none).
pub fn batch_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("batch_") && n.ends_with(".npz"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no batches in {}", dir.display());
    }
    Ok(files)
}

/// The calibration batches the check uses: the first 8.
fn batches(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = batch_files(dir)?;
    files.truncate(8);
    Ok(files)
}

/// Runs `model` in ONNX Runtime (graph optimisations `opt`) on `files`, writing the outputs of
/// batch i to `out_dir/ort_<i>.npz` (`python/ort_qdq.py`).
pub fn run_ort(python: &Path, model: &Path, out_dir: &Path, files: &[PathBuf], opt: &str) -> Result<()> {
    run_runtime("ort", CpuLane::Host, python, model, out_dir, files, opt)
}

/// [`run_ort`] in the runtime named (`ort`, or `openvino`: `python/ov_qdq.py`, same outputs).
pub fn run_runtime(
    runtime: &str,
    lane: CpuLane,
    python: &Path,
    model: &Path,
    out_dir: &Path,
    files: &[PathBuf],
    opt: &str,
) -> Result<()> {
    let script = match runtime {
        "ort" => "ort_qdq.py",
        "openvino" => "ov_qdq.py",
        other => bail!("unknown runtime `{other}`: ort or openvino"),
    };
    let output = lane
        .python(python)?
        .arg(crate::pyenv::script(script))
        .arg(model)
        .arg(out_dir)
        .args(files)
        .args(["--opt", opt])
        .stdout(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {script} ({lane})"))?;
    if !output.status.success() {
        // Without qemu's warnings about the CPU features it cannot emulate.
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("qemu-x86_64: warning")).collect();
        bail!("{runtime} failed on {} ({lane}):\n{}", model.display(), said.join("\n"));
    }
    Ok(())
}

fn feeds(path: &Path, device: &Device) -> Result<Vec<(String, Value)>> {
    mppq_api::data::npy::read_npz(path)?
        .into_iter()
        .map(|(n, d)| Ok((n, Value::Tensor(Tensor::from_data(&d, device)?))))
        .collect()
}

fn outputs_f32(out: Vec<(String, Value)>) -> Result<Vec<(String, Vec<f32>)>> {
    out.into_iter()
        .map(|(n, v)| {
            let t = v.as_tensor().ok_or_else(|| anyhow!("output `{n}` is not a tensor"))?.to_f32_vec();
            Ok((n, t))
        })
        .collect()
}

/// The output config that decides a graph output's grid: its producer's, looking through
/// data-movement operations (Reshape, Flatten, …) that do not change values.
pub fn output_config(g: &Graph, var: VarId) -> Option<TensorQuantConfig> {
    let mut v = var;
    for _ in 0..16 {
        let op = g.operation(g.producer(v)?).ok()?;
        let slot = op.outputs().iter().position(|o| *o == Some(v))?;
        if let Some(c) = op.quant_config.as_ref().and_then(|qc| qc.output_configs.get(slot).cloned().flatten())
            && c.state.is_active()
        {
            return Some(c);
        }
        if !matches!(op.op_type.as_str(), "Reshape" | "Flatten" | "Transpose" | "Squeeze" | "Unsqueeze" | "Identity") {
            return None;
        }
        v = op.inputs().first().copied().flatten()?;
    }
    None
}

/// The quantization step an output is compared with: its own config's scale, or for a float
/// output (an FP32 operation such as a final residual Add) the largest step among the quantized
/// tensors it is computed from, since one-step flips there reach the output unchanged.
/// An If's output is its branches' output: the largest step among them (each sample takes one).
pub fn output_step(g: &Graph, var: VarId) -> Option<f32> {
    let per_tensor = |c: TensorQuantConfig| (c.scale.len() == 1).then(|| c.scale[0]);
    if let Some(c) = output_config(g, var) {
        return per_tensor(c);
    }
    let op = g.operation(g.producer(var)?).ok()?;
    if op.op_type == "If" {
        let slot = op.outputs().iter().position(|o| *o == Some(var))?;
        let branches = op.attributes.values().filter_map(|a| match a {
            mppq_ir::attribute::Attribute::Graph(b) => Some(b.as_ref()),
            _ => None,
        });
        return branches.filter_map(|b| output_step(b, *b.outputs().get(slot)?)).reduce(f32::max);
    }
    op.input_ids().filter_map(|v| output_config(g, v).and_then(per_tensor)).reduce(f32::max)
}

/// (elements within tolerance, max |a − b| / tolerance) of `a` against `b`: one quantization
/// step, or for a float output with no quantized input to take a step from, 1e-5 of the
/// tensor's largest magnitude (float sums in another order; an element-wise relative bound fails
/// wherever a sum nearly cancels).
fn agreement(a: &[f32], b: &[f32], step: Option<f32>) -> (usize, f64) {
    let mut ok = 0;
    let mut worst = 0f64;
    let float_tolerance = 1e-5 * b.iter().map(|y| f64::from(y.abs())).fold(1e-6, f64::max);
    for (x, y) in a.iter().zip(b) {
        let d = f64::from((x - y).abs());
        let (within, rel) = match step {
            Some(s) => (d <= f64::from(s) * (1.0 + 1e-4), d / f64::from(s)),
            None => (d <= float_tolerance, d / float_tolerance),
        };
        ok += usize::from(within);
        worst = worst.max(rel);
    }
    (ok, worst)
}

/// Quantizes `model_path` exactly as `mppq quantize` does (the full pass pipeline of the setting's
/// platform), exports it, and compares ONNX Runtime, our executor and the simulation on the batches.
pub fn check_model(
    name: &str,
    model_path: &Path,
    calib_dir: &Path,
    opts: &Options,
    python: &Path,
) -> Result<Vec<ModelResult>> {
    let device = Device::cpu();
    let files = batches(calib_dir)?;
    let data: Vec<_> = files.iter().map(|f| feeds(f, &device)).collect::<Result<_>>()?;
    let mut setting = match &opts.setting {
        Some(path) => mppq_api::QuantizeSetting::from_file(path)?,
        None => mppq_api::QuantizeSetting::default(),
    };
    if let Some(platform) = &opts.platform {
        setting.platform = platform.clone();
    }
    // The setting as the user gives it: no mode switched by the host's CPU (the lanes run the
    // export on each class instead).
    // The user's path: the `qdq` exporter of the registry, with the setting's `[export.qdq]`.
    setting.exporters = Some(vec!["qdq".into()]);
    let mut quantizer = mppq_api::load_quantizer(model_path, setting)?;
    let calib = mppq_api::CalibrationSet::from_path(&quantizer.model, calib_dir, Some(files.len()))?;
    quantizer.quantize(&calib, &mut mppq_api::passes::NoProgress)?;
    let dir = tempfile::tempdir()?;
    let artifacts = quantizer.export_to(dir.path())?;
    let [artifact] = artifacts.as_slice() else {
        bail!("{name}: the qdq exporter wrote {} files, expected 1", artifacts.len())
    };
    let path = dir.path().join(format!("{name}.qdq.onnx"));
    std::fs::rename(&artifact.path, &path)?;
    // The float model before the optimisation passes changed it (bias correction, …).
    let reference_exec = quantizer.reference_executor()?;
    let model = quantizer.model;
    if let Ok(keep) = std::env::var("MPPQ_QDQ_KEEP") {
        std::fs::create_dir_all(&keep)?;
        std::fs::copy(&path, Path::new(&keep).join(format!("{name}.qdq.onnx")))?;
    }

    let lanes = opts.lanes();
    for (l, lane) in lanes.iter().enumerate() {
        let out = dir.path().join(format!("lane{l}"));
        std::fs::create_dir_all(&out)?;
        run_runtime(&opts.runtime, *lane, python, &path, &out, &files, &opts.ort_opt)
            .with_context(|| format!("{name}: ONNX Runtime on the exported model ({lane})"))?;
    }

    let g = &model.graph;
    let opsets = |d: &str| model.opset_imports.get(d).copied().unwrap_or(0);
    let exec = Executor::new(g, &OpRegistry::builtin(), &device, &opsets)?;
    // Our executor runs the export as ONNX Runtime does: QDQ convolutions fused into QLinearConv.
    let mut reloaded = mppq_onnx::load_model(&path)?;
    mppq_ir::morph::fuse_qdq_conv(&mut reloaded.graph)?;
    let ex_opsets = |d: &str| reloaded.opset_imports.get(d).copied().unwrap_or(0);
    let ours = Executor::new(&reloaded.graph, &OpRegistry::builtin(), &device, &ex_opsets)?;
    let steps: Vec<Option<f32>> = g.outputs().iter().map(|v| output_step(g, *v)).collect();

    let (mut fp_all, mut sim_all, mut ours_all) = (vec![], vec![], vec![]);
    let mut ort_all = vec![Vec::new(); lanes.len()];
    let mut ok_ort = vec![0usize; lanes.len()];
    let mut worst = vec![0f64; lanes.len()];
    let (mut total, mut ok_ours) = (0usize, 0usize);
    for (i, batch) in data.iter().enumerate() {
        let fp = outputs_f32(reference_exec.as_ref().unwrap_or(&exec).run(batch.clone(), &mut [])?)?;
        let mut hook = QuantSimulation::new(g, BurnFakeQuant);
        let sim = outputs_f32(exec.run(batch.clone(), &mut [&mut hook])?)?;
        let mine = outputs_f32(ours.run(batch.clone(), &mut [])?)?;
        // Our executor fuses only the convolutions (QLinearConv) and runs the rest of the export
        // in float: its reference is the simulation with integer convolutions only.
        let mut conv_only = QuantSimulation::new(g, BurnFakeQuant).integer_kernels_for(&["Conv"]);
        let sim_conv_only = outputs_f32(exec.run(batch.clone(), &mut [&mut conv_only])?)?;
        let ort: Vec<_> = (0..lanes.len())
            .map(|l| mppq_api::data::npy::read_npz(&dir.path().join(format!("lane{l}/ort_{i:03}.npz"))))
            .collect::<std::result::Result<_, _>>()?;
        for (k, (oname, s)) in sim.iter().enumerate() {
            let m = &mine
                .iter()
                .find(|(n, _)| n == oname)
                .ok_or_else(|| anyhow!("{name}: no output `{oname}` from our executor"))?
                .1;
            for (l, lane_out) in ort.iter().enumerate() {
                let o = lane_out
                    .iter()
                    .find(|(n, _)| n == oname)
                    .ok_or_else(|| anyhow!("{name}: ORT ({}) gave no output `{oname}`", lanes[l]))?
                    .1
                    .to_f32_vec()?;
                if o.len() != s.len() || m.len() != s.len() {
                    bail!(
                        "{name}: output `{oname}` has {} elements in ORT, {} in ours, {} in the simulation",
                        o.len(),
                        m.len(),
                        s.len()
                    );
                }
                let (a, w) = agreement(&o, s, steps[k]);
                ok_ort[l] += a;
                worst[l] = worst[l].max(w);
                ort_all[l].extend_from_slice(&o);
            }
            let (b, _) = agreement(m, &sim_conv_only[k].1, steps[k]);
            total += s.len();
            ok_ours += b;
            fp_all.extend_from_slice(&fp[k].1);
            sim_all.extend_from_slice(s);
            ours_all.extend_from_slice(m);
        }
    }
    let pct = |n: usize| 100.0 * n as f64 / total.max(1) as f64;
    let (snr_sim, snr_ours) = (snr_db(&fp_all, &sim_all), snr_db(&fp_all, &ours_all));
    let ours_agreement_pct = pct(ok_ours);
    Ok(lanes
        .iter()
        .enumerate()
        .map(|(l, lane)| {
            let snr_ort = snr_db(&fp_all, &ort_all[l]);
            let agreement_pct = pct(ok_ort[l]);
            let delta = snr_ort - snr_sim;
            // Nothing quantized (a platform that quantizes none of the model's types): the
            // simulation is the float model exactly, and ORT must match it to float rounding.
            let same_snr =
                if snr_sim.is_infinite() { snr_ort >= FLOAT_ONLY_MIN_SNR_DB } else { delta.abs() <= MAX_DELTA_SNR_DB };
            let pass = agreement_pct >= MIN_AGREEMENT && same_snr && ours_agreement_pct >= MIN_AGREEMENT;
            ModelResult {
                model: name.to_string(),
                cpu: lane.to_string(),
                elements: total,
                agreement_pct,
                snr_ort_db: snr_ort,
                snr_sim_db: snr_sim,
                delta_snr_db: delta,
                ours_agreement_pct,
                snr_ours_db: snr_ours,
                max_diff_steps: worst[l],
                pass,
            }
        })
        .collect())
}

fn lane_names(opts: &Options) -> String {
    opts.lanes().iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The names of the testdata models (`testdata/<name>.onnx`), sorted.
pub fn testdata_models() -> Result<Vec<String>> {
    let root = workspace_root();
    let mut names: Vec<String> = std::fs::read_dir(root.join("testdata"))?
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .filter(|n| root.join(format!("testdata/{n}.onnx")).exists())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Runs the check; returns whether every model met the targets.
pub fn run(opts: &Options) -> Result<bool> {
    let python = crate::pyenv::python()?;
    let root = workspace_root();
    let names = if opts.models.is_empty() { testdata_models()? } else { opts.models.clone() };
    let mut models: Vec<(String, PathBuf, PathBuf)> = names
        .into_iter()
        .map(|n| {
            let (model, calib) = (root.join(format!("testdata/{n}.onnx")), root.join(format!("testdata/{n}_calib")));
            (n, model, calib)
        })
        .collect();
    if opts.resnet18 {
        let (model, calib) = crate::bench::ensure_resnet18()?;
        models.push(("resnet18".into(), model, calib));
    }
    println!("CPU classes ORT runs the export on: {}", lane_names(opts));
    println!(
        "{:<18} {:<24} {:>9} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10}  result",
        "model", "cpu", "elements", "within 1q", "SNR ort", "SNR sim", "ΔSNR", "max Δ/q", "ours=sim"
    );
    let mut results = Vec::new();
    for (m, model, calib) in &models {
        for r in check_model(m, model, calib, opts, &python).with_context(|| format!("model {m}"))? {
            println!(
                "{:<18} {:<24} {:>9} {:>9.3}% {:>7.2} dB {:>7.2} dB {:>+8.3} {:>10.2} {:>9.3}%  {}",
                r.model,
                r.cpu,
                r.elements,
                r.agreement_pct,
                r.snr_ort_db,
                r.snr_sim_db,
                r.delta_snr_db,
                r.max_diff_steps,
                r.ours_agreement_pct,
                if r.pass { "ok" } else { "MISS" }
            );
            results.push(r);
        }
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)?;
    }
    let all = results.iter().all(|r| r.pass);
    if !all && opts.report_only {
        println!("(report only: the misses above are reported, not failed)");
        return Ok(true);
    }
    Ok(all)
}
