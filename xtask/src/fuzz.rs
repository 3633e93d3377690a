//! `cargo xtask fuzz TARGET`: runs one target of `xtask/fuzz` under libFuzzer, built by cargo-fuzz
//! without a sanitizer (so on our pinned stable toolchain) and with debug assertions (an integer
//! overflow is a finding). The time given is the fuzzer's own CPU time (user + system), so runs
//! sharing a machine still fuzz as long as asked; the wall time is printed beside it. The working corpus is `target/fuzz-corpus/TARGET`, seeded from the
//! kept corpus `testdata/fuzz/TARGET`; `--keep` minimises it afterwards (libFuzzer's merge) and
//! writes it back there, `regression-*` files (inputs that once crashed) always kept.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Options {
    pub target: String,
    pub minutes: f64,
    pub keep: bool,
}

const FUZZ_DIR: &str = "xtask/fuzz";
const TARGET_DIR: &str = "target/fuzz";

/// The build flags every cargo-fuzz call must share (else each rebuilds).
fn cargo_fuzz(verb: &str, target: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.args(["fuzz", verb, "--fuzz-dir", FUZZ_DIR, "--target-dir", TARGET_DIR, "-s", "none", "-a", "-O"]).args([
        "--features",
        "libfuzzer",
        target,
    ]);
    cmd
}

pub fn run(opts: &Options) -> Result<bool> {
    let known: Vec<&str> = mppq_fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    if !known.contains(&opts.target.as_str()) {
        bail!("unknown fuzz target `{}`; targets: {}", opts.target, known.join(", "));
    }
    let probe = Command::new("cargo").args(["fuzz", "--version"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        bail!("cargo-fuzz is not installed: `cargo install cargo-fuzz --locked` (it builds on stable)");
    }
    let kept = Path::new("testdata/fuzz").join(&opts.target);
    let corpus = Path::new("target/fuzz-corpus").join(&opts.target);
    let artifacts = Path::new("target/fuzz-artifacts").join(&opts.target);
    std::fs::create_dir_all(&corpus)?;
    std::fs::create_dir_all(&artifacts)?;
    for file in files(&kept)? {
        if let Some(name) = file.file_name() {
            std::fs::copy(&file, corpus.join(name))?;
        }
    }
    let status = cargo_fuzz("build", &opts.target).status().context("running cargo fuzz build")?;
    if !status.success() {
        bail!("cargo fuzz build failed: {status}");
    }
    let binary = Path::new(TARGET_DIR).join(HOST_TRIPLE).join("release").join(&opts.target);
    let started = std::time::Instant::now();
    let mut child = Command::new(&binary);
    // The targets write their inputs to scratch files: on a disk they waited on writes (onnx_load:
    // half a core, 3 000 inputs/s), on tmpfs they run (a whole core, 16 000 inputs/s).
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let scratch = shm.join(format!("mppq-fuzz-{}", opts.target));
        std::fs::create_dir_all(&scratch)?;
        child.env("TMPDIR", scratch);
    }
    let mut child = child
        .arg(&corpus)
        .arg("-timeout=10")
        .arg("-rss_limit_mb=4096")
        .args(max_len(&opts.target).map(|n| format!("-max_len={n}")))
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let budget = opts.minutes * 60.0;
    let mut used = 0.0;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        used = cpu_seconds(child.id()).unwrap_or(used);
        if used >= budget {
            // libFuzzer stops on SIGINT as at the end of -max_total_time: stats, then exit.
            let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    println!(
        "fuzz {}: {:.1} CPU min in {:.1} wall min, {status}",
        opts.target,
        used / 60.0,
        started.elapsed().as_secs_f64() / 60.0
    );
    let crashers = files(&artifacts)?;
    for file in &crashers {
        println!("finding: {}", file.display());
    }
    if opts.keep {
        keep_minimised(&binary, &corpus, &kept)?;
    }
    // libFuzzer exits 72 when interrupted: how a CPU budget ends.
    Ok((status.success() || status.code() == Some(72)) && crashers.is_empty())
}

/// Minimises the working corpus (libFuzzer's merge, with the binary that fuzzed: `cargo fuzz
/// cmin` would rebuild it first) and makes it the kept one, keeping every `regression-*` input.
fn keep_minimised(binary: &Path, corpus: &Path, kept: &Path) -> Result<()> {
    let merged = corpus.with_extension("merged");
    let _ = std::fs::remove_dir_all(&merged);
    std::fs::create_dir_all(&merged)?;
    let status = Command::new(binary)
        .arg("-merge=1")
        .arg("-timeout=10")
        .arg(&merged)
        .arg(corpus)
        .status()
        .context("running the libFuzzer merge")?;
    if !status.success() {
        bail!("libFuzzer's merge failed: {status}");
    }
    let _ = std::fs::remove_dir_all(corpus);
    std::fs::rename(&merged, corpus)?;
    let regressions: Vec<PathBuf> = files(kept)?
        .into_iter()
        .filter(|f| f.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("regression-")))
        .collect();
    let staged = kept.with_extension("new");
    let _ = std::fs::remove_dir_all(&staged);
    std::fs::create_dir_all(&staged)?;
    for file in files(corpus)?.iter().chain(&regressions) {
        if let Some(name) = file.file_name() {
            std::fs::copy(file, staged.join(name))?;
        }
    }
    let _ = std::fs::remove_dir_all(kept);
    std::fs::rename(&staged, kept)?;
    println!("kept corpus {}: {} inputs", kept.display(), files(kept)?.len());
    Ok(())
}

/// Largest input libFuzzer may make. The pipeline target's corpus is kept in git and replayed
/// by every test run: small models (the seeds are 2–10 KB) keep it a few MB and fast.
fn max_len(target: &str) -> Option<usize> {
    (target == "quantize_pipeline").then_some(16 << 10)
}

/// The triple cargo-fuzz builds for (its `--target` default: the host).
const HOST_TRIPLE: &str =
    if cfg!(target_arch = "aarch64") { "aarch64-unknown-linux-gnu" } else { "x86_64-unknown-linux-gnu" };

/// User + system CPU seconds of a running process (Linux `/proc/PID/stat`; `None` elsewhere).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
