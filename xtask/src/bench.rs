//! `cargo xtask bench`: FP32 inference time of the testdata models (plus a generated
//! ResNet-18 at 1×3×224×224) on our executor and on ONNX Runtime (Python, same thread count),
//! in the same run, and the time of our simulated INT8 forward (default platform) on the same
//! input; prints the ratios per model, the CPU's vector extensions and the matrix kernels that
//! ran. Medians after warm-up.

use anyhow::{Context, Result, bail};
use mppq_exec::{Device, Executor, OpRegistry, Tensor, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::proto::workspace_root;
use crate::pyenv;

pub struct Options {
    pub runs: usize,
    pub warmup: usize,
    pub json: Option<PathBuf>,
    pub threads: usize,
    pub skip_resnet: bool,
    /// Also print where our time goes: share per operator type (one extra profiled run).
    pub profile: bool,
    /// Our device by name (`cpu`, or `wgpu` in a build with the `wgpu` feature); ONNX Runtime
    /// runs on the CPU either way, so on `wgpu` the ratio compares a GPU with the host's CPU.
    pub device: String,
}

/// Wall time per operator type (kernel plus the engine's work around it), in execution order of
/// first appearance. The CPU backend is eager, so an op's time ends when its kernel returns.
#[derive(Default)]
struct Profile {
    started: Option<Instant>,
    per_type: Vec<(String, f64, usize)>,
}

impl mppq_exec::ExecHook for Profile {
    fn before_op(&mut self, _: &mppq_exec::hooks::OpInfo<'_>, _: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        self.started = Some(Instant::now());
        Ok(())
    }
    fn after_op(&mut self, op: &mppq_exec::hooks::OpInfo<'_>, _: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        let ms = self.started.take().map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
        match self.per_type.iter_mut().find(|(t, _, _)| t == op.op_type) {
            Some(entry) => {
                entry.1 += ms;
                entry.2 += 1;
            }
            None => self.per_type.push((op.op_type.to_string(), ms, 1)),
        }
        Ok(())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// The ResNet-18 model and its calibration directory, generated into `target/bench` on first use
/// (45 MB: not committed).
pub fn ensure_resnet18() -> Result<(PathBuf, PathBuf)> {
    let dir = workspace_root().join("target/bench");
    let model = dir.join("resnet18.onnx");
    let calib = dir.join("calib");
    if !model.exists() || !calib.exists() {
        std::fs::create_dir_all(&dir)?;
        let status = Command::new(pyenv::python()?)
            .arg(pyenv::script("gen_testdata.py"))
            .arg("--resnet18")
            .arg(&model)
            .arg("--resnet18-calib")
            .arg(&calib)
            .status()?;
        if !status.success() {
            bail!("generating ResNet-18 failed");
        }
    }
    Ok((model, calib))
}

/// (name, model, one input batch as .npz, calibration directory)
fn models(opts: &Options) -> Result<Vec<(String, PathBuf, PathBuf, PathBuf)>> {
    let root = workspace_root();
    let mut list = Vec::new();
    for name in ["tiny_cnn", "tiny_transformer", "detect_branch"] {
        list.push((
            name.to_string(),
            root.join(format!("testdata/{name}.onnx")),
            root.join(format!("testdata/{name}_calib/batch_000.npz")),
            root.join(format!("testdata/{name}_calib")),
        ));
    }
    if !opts.skip_resnet {
        let (model, calib) = ensure_resnet18()?;
        let first = std::fs::read_dir(&calib)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "npz"))
            .min()
            .context("no ResNet-18 calibration batch")?;
        list.push(("resnet18".into(), model, first, calib));
    }
    Ok(list)
}

fn ours(model: &Path, inputs: &Path, opts: &Options) -> Result<(f64, Option<String>)> {
    let mut loaded = mppq_onnx::load_model(model)?;
    // ONNX Runtime folds BatchNormalization into convolutions at load; so do we.
    mppq_ir::morph::fold_batchnorm(&mut loaded.graph)?;
    let device = Device::by_name(&opts.device).with_context(|| {
        format!("device `{}` is not in this build (wgpu and ndarray need the xtask feature of that name)", opts.device)
    })?;
    let opsets = |d: &str| loaded.opset(d).unwrap_or(0);
    let exec = Executor::new(&loaded.graph, &OpRegistry::builtin(), &device, &opsets)?;
    let feeds = mppq_api::model::run::read_feeds(&loaded, inputs)?;
    let feeds: Vec<(String, Value)> = feeds
        .into_iter()
        .map(|(n, d)| Ok((n, Value::Tensor(Tensor::from_data(&d, &device)?))))
        .collect::<Result<_>>()?;
    let median_ms = time_runs(opts, || exec.run(feeds.clone(), &mut []))?;
    let profile =
        if opts.profile { Some(profile_run(|hook| exec.run(feeds.clone(), &mut [hook]).map(|_| ()))?) } else { None };
    Ok((median_ms, profile))
}

/// One run of `run` with a [`Profile`] hook: one line per operator type (time, share), then the
/// engine's own time between operators.
fn profile_run(run: impl FnOnce(&mut dyn mppq_exec::ExecHook) -> mppq_exec::Result<()>) -> Result<String> {
    let mut p = Profile::default();
    let start = Instant::now();
    run(&mut p)?;
    let total = start.elapsed().as_secs_f64() * 1e3;
    let in_ops: f64 = p.per_type.iter().map(|(_, ms, _)| ms).sum();
    p.per_type.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut lines: Vec<String> = p
        .per_type
        .iter()
        .map(|(t, ms, n)| format!("    {t:<20} {n:>4} ops {ms:>9.2} ms {:>5.1} %", 100.0 * ms / total.max(1e-9)))
        .collect();
    lines.push(format!(
        "    {:<20}          {:>9.2} ms {:>5.1} %",
        "(engine between ops)",
        total - in_ops,
        100.0 * (total - in_ops) / total.max(1e-9)
    ));
    Ok(lines.join("\n"))
}

/// Median wall time (ms) of `run` over `opts.runs` runs after `opts.warmup`; the outputs are
/// read back so that all work has finished.
fn time_runs(opts: &Options, mut run: impl FnMut() -> mppq_exec::Result<Vec<(String, Value)>>) -> Result<f64> {
    let mut times = Vec::new();
    for i in 0..opts.warmup + opts.runs {
        let start = Instant::now();
        for (_, v) in &run()? {
            if let Some(t) = v.as_tensor() {
                let _ = t.to_burn_data();
            }
        }
        if i >= opts.warmup {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(median(times))
}

/// Our simulated INT8 forward: the model quantized with the default platform and settings on its
/// calibration directory, then run with fake quantization on `inputs`.
fn ours_int8(model: &Path, inputs: &Path, calib: &Path, opts: &Options) -> Result<(f64, Option<String>)> {
    let device = match opts.device.as_str() {
        "wgpu" | "gpu" => mppq_api::quantize::setting::DeviceKind::Wgpu,
        "ndarray" => mppq_api::quantize::setting::DeviceKind::Ndarray,
        _ => mppq_api::quantize::setting::DeviceKind::Cpu,
    };
    let setting = mppq_api::QuantizeSetting { device, ..Default::default() };
    let quantized = mppq_api::quantize::quantize_onnx_model(model, calib, setting)?;
    let q = &quantized.quantizer;
    let exec = q.executor()?;
    let feeds: Vec<(String, Value)> = mppq_api::model::run::read_feeds(&q.model, inputs)?
        .into_iter()
        .map(|(n, d)| Ok((n, Value::Tensor(Tensor::from_data(&d, q.device())?))))
        .collect::<Result<_>>()?;
    let memo = mppq_exec::SimulationMemo::new();
    let median_ms = time_runs(opts, || {
        let mut sim = mppq_exec::QuantSimulation::new(&q.model.graph, mppq_exec::BurnFakeQuant).with_memo(&memo);
        exec.run(feeds.clone(), &mut [&mut sim])
    })?;
    // The profile hook runs first, so an operator's time includes the fake quantization and
    // integer simulation around it.
    let profile = if opts.profile {
        let mut sim = mppq_exec::QuantSimulation::new(&q.model.graph, mppq_exec::BurnFakeQuant).with_memo(&memo);
        Some(profile_run(|hook| exec.run(feeds.clone(), &mut [hook, &mut sim]).map(|_| ()))?)
    } else {
        None
    };
    Ok((median_ms, profile))
}

/// The CPU's name and the vector extensions our kernels dispatch on, as detected at run time.
fn cpu_line() -> String {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let mut flags: Vec<&str> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => {$(if std::arch::is_x86_feature_detected!($f) { flags.push($f); })*};
        }
        probe!("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avxvnni");
    }
    #[cfg(target_arch = "aarch64")]
    flags.push("neon");
    format!(
        "CPU: {name}, {} threads; extensions: {}; matrix kernels: float {}, int8 {} (MPPQ_GEMM_KERNEL, \
         MPPQ_IGEMM_KERNEL override)",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        flags.join(" "),
        mppq_exec::cpu::sgemm::GemmKernel::detect().name(),
        mppq_exec::cpu::igemm::IgemmKernel::detect().name()
    )
}

fn ort(model: &Path, inputs: &Path, opts: &Options) -> Result<f64> {
    let out = tempfile::tempdir()?;
    let output = Command::new(pyenv::python()?)
        .arg(pyenv::script("ort_run.py"))
        .arg(model)
        .arg(inputs)
        .arg(out.path())
        .args([
            "--threads",
            &opts.threads.to_string(),
            "--bench",
            &opts.runs.to_string(),
            "--warmup",
            &opts.warmup.to_string(),
        ])
        .output()?;
    if !output.status.success() {
        bail!("ort_run.py failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| l.contains("median_ms")).context("no timing from ort_run.py")?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    v["median_ms"].as_f64().context("median_ms")
}

pub fn run(opts: &Options) -> Result<()> {
    let mut json = serde_json::Map::new();
    let cpu = cpu_line();
    println!("{cpu}");
    println!("ours on device `{}`; ONNX Runtime on the CPU, {} threads", opts.device, opts.threads);
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>12}",
        "model", "ours ms", "ort ms", "ratio", "int8 sim ms", "sim/ort fp32"
    );
    for (name, model, inputs, calib) in models(opts)? {
        let (ours_ms, profile) = match ours(&model, &inputs, opts) {
            Ok(t) => t,
            Err(e) => {
                println!("{name:<18} cannot run on our executor: {e:#}");
                continue;
            }
        };
        let ort_ms = ort(&model, &inputs, opts)?;
        let (int8_ms, int8_profile) =
            ours_int8(&model, &inputs, &calib, opts).with_context(|| format!("{name}: simulated INT8"))?;
        let ratio = ours_ms / ort_ms;
        println!("{name:<18} {ours_ms:>10.2} {ort_ms:>10.2} {ratio:>8.2} {int8_ms:>12.2} {:>12.2}", int8_ms / ort_ms);
        if let Some(profile) = profile {
            println!("  FP32:\n{profile}");
        }
        if let Some(profile) = int8_profile {
            println!("  simulated INT8:\n{profile}");
        }
        json.insert(
            name,
            serde_json::json!({"ours_ms": ours_ms, "ort_ms": ort_ms, "ratio": ratio, "int8_sim_ms": int8_ms, "int8_sim_ratio": int8_ms / ort_ms}),
        );
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&serde_json::json!({"cpu": cpu, "models": json}))?)?;
    }
    Ok(())
}
