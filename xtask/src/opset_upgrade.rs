//! `cargo xtask opset-upgrade`: the opset conversion (`mppq_ir::morph::upgrade_opset`, through
//! `mppq_onnx::upgrade_model`) checked in ONNX Runtime. Every backend-test model below opset 13
//! (below 18 when it has a Reduce* operator), plus the old-opset single-operator models that
//! `python/gen_old_opset.py` writes (expected outputs from ORT on the original, or NumPy), is
//! converted to opset 13 and to 21, saved, run in ORT on its test data and compared with the
//! expected outputs (`python/ort_compare.py`: the conformance tolerance). Prints a table per
//! rewritten operator type; fails when a converted model disagrees with the expected outputs,
//! or does not load where the original did.

use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::backend_tests::{self, SUITES};
use crate::proto::workspace_root;
use crate::pyenv;

const TARGETS: [i64; 2] = [13, 21];

pub struct Options {
    pub data: Option<PathBuf>,
    /// Only cases whose id contains this.
    pub filter: Option<String>,
    /// List the cases ORT could not check, and every blocker.
    pub verbose: bool,
    /// Instead of the test data: convert these models to opset 13 and compare ORT on the
    /// original and the converted model on random inputs.
    pub models: Vec<PathBuf>,
    /// `NAME=D0,D1,...`: the shape of input NAME for `models` (unknown dimensions default to 1).
    pub shapes: Vec<String>,
}

/// `--model`: converts each model to opset 13 and prints ORT's largest output difference
/// between the original and the converted model on random inputs (`python/ort_pair.py`).
fn run_models(opts: &Options) -> Result<bool> {
    let python = pyenv::python()?;
    let out = tempfile::tempdir()?;
    let mut green = true;
    for (i, path) in opts.models.iter().enumerate() {
        let started = std::time::Instant::now();
        let mut model = mppq_onnx::load_model(path)?;
        let upgrade = match mppq_onnx::upgrade_model(&mut model, 13) {
            Ok(u) => u,
            Err(e) => {
                println!("{}: {e}", path.display());
                green = false;
                continue;
            }
        };
        let converted = out.path().join(format!("{i}.onnx"));
        mppq_onnx::save_model(&model, &converted, &Default::default())?;
        let seconds = started.elapsed().as_secs_f64();
        let mut cmd = Command::new(&python);
        cmd.arg(pyenv::script("ort_pair.py")).arg(path).arg(&converted);
        for s in &opts.shapes {
            cmd.args(["--shape", s]);
        }
        let output = cmd.output().context("running ort_pair.py")?;
        let report = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if !output.status.success() {
            green = false;
            println!("{}: {upgrade}; ORT: {report} {}", path.display(), String::from_utf8_lossy(&output.stderr).trim());
            continue;
        }
        println!("{}: {upgrade} ({seconds:.2} s); ORT original vs converted: {report}", path.display());
        for r in upgrade.rewrites.iter().filter(|_| opts.verbose) {
            println!("    {r}");
        }
    }
    Ok(green)
}

/// One model with its test data.
struct Case {
    id: String,
    dir: PathBuf,
    opset: i64,
    /// Operator types rewritten for some target (empty: only the opset number changed).
    rewritten: Vec<String>,
    conversions: Vec<Conversion>,
}

enum Conversion {
    /// The model is already at the target.
    Skipped,
    Blocked(String),
    Saved(PathBuf),
    Failed(String),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Pass,
    Fail,
    /// ORT cannot check it: it runs neither model, or disagrees with the test on the original too.
    Unchecked,
    Blocked,
    Skipped,
}

/// The backend cases and the generated ones: (id, directory).
fn all_cases(root: &Path, generated: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut cases: Vec<(String, PathBuf)> =
        backend_tests::cases(root, &SUITES)?.into_iter().map(|c| (format!("{}/{}", c.suite, c.name), c.dir)).collect();
    let mut names: Vec<String> = std::fs::read_dir(generated)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("model.onnx").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    cases.extend(names.into_iter().map(|n| (format!("generated/{n}"), generated.join(&n))));
    Ok(cases)
}

/// Loads the case's model and converts it to each target, saving the results under `out`.
fn convert(id: &str, dir: &Path, out: &Path, index: usize) -> Result<Option<Case>> {
    let model = mppq_onnx::load_model(dir.join("model.onnx"))?;
    let opset = model.opset("").unwrap_or(1);
    let reduce = model.graph.operations().any(|(_, o)| o.op_type.starts_with("Reduce"));
    // The generated cases are all old forms (GroupNormalization-18 for the 21 target).
    if !id.starts_with("generated/") && (opset >= 18 || (opset >= 13 && !reduce)) {
        return Ok(None);
    }
    let mut case =
        Case { id: id.to_string(), dir: dir.to_path_buf(), opset, rewritten: Vec::new(), conversions: Vec::new() };
    for target in TARGETS {
        if target <= opset {
            case.conversions.push(Conversion::Skipped);
            continue;
        }
        let mut m = model.clone();
        let conversion = match mppq_onnx::upgrade_model(&mut m, target) {
            Err(e) => Conversion::Blocked(e.to_string()),
            Ok(up) => {
                for (t, _) in up.counts() {
                    if !case.rewritten.contains(&t) {
                        case.rewritten.push(t);
                    }
                }
                let path = out.join(format!("{index}_{target}.onnx"));
                match mppq_onnx::save_model(&m, &path, &Default::default()) {
                    Ok(()) => Conversion::Saved(path),
                    Err(e) => Conversion::Failed(format!("save: {e}")),
                }
            }
        };
        case.conversions.push(conversion);
    }
    Ok(Some(case))
}

/// Runs `ort_compare.py` on `jobs` (id, model, case directory): id → (status, message).
fn ort_compare(python: &Path, jobs: &[(String, PathBuf, PathBuf)]) -> Result<HashMap<String, (String, String)>> {
    let mut child = Command::new(python)
        .arg(pyenv::script("ort_compare.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting ort_compare.py")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let lines: Vec<String> =
        jobs.iter().map(|(id, model, dir)| format!("{id}\t{}\t{}", model.display(), dir.display())).collect();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for l in lines {
            writeln!(stdin, "{l}")?;
        }
        Ok(())
    });
    let output = child.wait_with_output()?;
    writer.join().map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    if !output.status.success() {
        bail!("ort_compare.py failed");
    }
    let mut results = HashMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("bad line {line}"))?;
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        results.insert(field("id"), (field("status"), field("message")));
    }
    Ok(results)
}

#[derive(Default)]
struct Row {
    cases: usize,
    /// Per target: converted, pass, fail, unchecked.
    counts: [[usize; 4]; TARGETS.len()],
}

/// Counts a verdict: [converted, pass, fail, unchecked].
fn tally(counts: &mut [usize; 4], verdict: Verdict) {
    let slot = match verdict {
        Verdict::Blocked | Verdict::Skipped => return,
        Verdict::Pass => 1,
        Verdict::Fail => 2,
        Verdict::Unchecked => 3,
    };
    counts[0] += 1;
    counts[slot] += 1;
}

pub fn run(opts: &Options) -> Result<bool> {
    if !opts.models.is_empty() {
        return run_models(opts);
    }
    let started = std::time::Instant::now();
    let root = backend_tests::data_dir(opts.data.as_deref())?;
    let python = pyenv::python()?;
    let generated = workspace_root().join("target/opset-upgrade-cases");
    let status = Command::new(&python)
        .arg(pyenv::script("gen_old_opset.py"))
        .arg(&generated)
        .stdout(Stdio::null())
        .status()
        .context("running gen_old_opset.py")?;
    if !status.success() {
        bail!("gen_old_opset.py failed");
    }
    let out = tempfile::tempdir()?;
    let mut cases = Vec::new();
    for (index, (id, dir)) in all_cases(&root, &generated)?.into_iter().enumerate() {
        if opts.filter.as_ref().is_some_and(|f| !id.contains(f.as_str())) {
            continue;
        }
        if let Some(case) = convert(&id, &dir, out.path(), index).with_context(|| id.clone())? {
            cases.push(case);
        }
    }
    let mut jobs = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        jobs.push((format!("orig/{i}"), case.dir.join("model.onnx"), case.dir.clone()));
        for (t, c) in TARGETS.iter().zip(&case.conversions) {
            if let Conversion::Saved(path) = c {
                jobs.push((format!("{t}/{i}"), path.clone(), case.dir.clone()));
            }
        }
    }
    let results = ort_compare(&python, &jobs)?;
    let status_of = |id: &str| results.get(id).cloned().unwrap_or_else(|| ("error".into(), "no result".into()));

    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let (mut failures, mut blocked, mut unchecked) = (Vec::new(), Vec::new(), Vec::new());
    let mut totals = [[0usize; 4]; TARGETS.len()];
    for (i, case) in cases.iter().enumerate() {
        let (orig, _) = status_of(&format!("orig/{i}"));
        let mut verdicts = Vec::new();
        for (k, (t, c)) in TARGETS.iter().zip(&case.conversions).enumerate() {
            let verdict = match c {
                Conversion::Skipped => Verdict::Skipped,
                Conversion::Blocked(why) => {
                    blocked.push(format!("{} (opset {} → {t}): {why}", case.id, case.opset));
                    Verdict::Blocked
                }
                Conversion::Failed(why) => {
                    failures.push(format!("{} → {t}: {why}", case.id));
                    Verdict::Fail
                }
                Conversion::Saved(_) => {
                    let (status, message) = status_of(&format!("{t}/{i}"));
                    let v = match (status.as_str(), orig.as_str()) {
                        ("pass", _) => Verdict::Pass,
                        ("error", o) if o != "error" => Verdict::Fail,
                        ("fail", o) if o != "fail" => Verdict::Fail,
                        _ => Verdict::Unchecked,
                    };
                    match v {
                        Verdict::Fail => failures.push(format!("{} → {t} (original: {orig}): {message}", case.id)),
                        Verdict::Unchecked => {
                            unchecked.push(format!("{} → {t}: original {orig}, converted {status}: {message}", case.id))
                        }
                        _ => {}
                    }
                    v
                }
            };
            let slot = &mut totals[k];
            tally(slot, verdict);
            verdicts.push(verdict);
        }
        let keys: Vec<String> =
            if case.rewritten.is_empty() { vec!["(opset number only)".into()] } else { case.rewritten.clone() };
        for key in keys {
            let row = rows.entry(key).or_default();
            row.cases += 1;
            for (k, v) in verdicts.iter().enumerate() {
                tally(&mut row.counts[k], *v);
            }
        }
    }

    println!(
        "| rewritten op type | cases | →13 converted | →13 ORT pass | →13 fail | →13 unchecked | →21 converted | →21 ORT pass | →21 fail | →21 unchecked |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let line = |name: &str, n: usize, c: &[[usize; 4]; 2]| {
        println!(
            "| {name} | {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c[0][0], c[0][1], c[0][2], c[0][3], c[1][0], c[1][1], c[1][2], c[1][3]
        );
    };
    for (name, row) in &rows {
        line(name, row.cases, &row.counts);
    }
    line("**all cases**", cases.len(), &totals);
    println!();
    println!(
        "unchecked: ORT runs neither the original nor the converted model, or disagrees with the test's outputs on the original too"
    );
    if opts.verbose {
        for u in &unchecked {
            println!("    unchecked {u}");
        }
    }
    for b in &blocked {
        if opts.verbose || b.contains("generated/") {
            println!("    blocked {b}");
        }
    }
    if !opts.verbose && !blocked.is_empty() {
        println!("    {} conversions blocked (--verbose lists them)", blocked.len());
    }
    for f in &failures {
        println!("    FAIL {f}");
    }
    let checked: usize = totals.iter().map(|t| t[1] + t[2]).sum();
    println!(
        "opset-upgrade: {} cases ({} generated), {checked} conversions checked in ORT: {} passed, {} failed; {:.1} s",
        cases.len(),
        cases.iter().filter(|c| c.id.starts_with("generated/")).count(),
        checked - failures.len().min(checked),
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(failures.is_empty())
}
