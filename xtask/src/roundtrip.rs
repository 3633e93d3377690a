//! `cargo xtask roundtrip`: for every backend-test model, load → save → load must give an equal
//! IR, and ONNX Runtime must load the saved file whenever it loaded the original.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::backend_tests::{self, SUITES};
use crate::pyenv;

#[derive(Default)]
struct Counts {
    models: usize,
    ir_equal: usize,
    ir_failed: Vec<String>,
    ort_both: usize,
    ort_original_only: Vec<String>,
    ort_neither: usize,
    ort_resaved_only: usize,
}

pub fn run(data: Option<&Path>, skip_ort: bool) -> Result<bool> {
    let root = backend_tests::data_dir(data)?;
    let cases = backend_tests::cases(&root, &SUITES)?;
    let out = tempfile::tempdir()?;
    let mut per_suite: BTreeMap<&str, Counts> = BTreeMap::new();
    let mut pairs = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let counts = per_suite.entry(case.suite).or_default();
        counts.models += 1;
        let id = format!("{}/{}", case.suite, case.name);
        let resaved = out.path().join(format!("{i}.onnx"));
        match check_one(&case.model(), &resaved) {
            Ok(()) => {
                counts.ir_equal += 1;
                pairs.push((id, case.model(), resaved));
            }
            Err(e) => counts.ir_failed.push(format!("{id}: {e:#}")),
        }
    }
    if !skip_ort {
        let py = pyenv::python()?;
        let mut child = Command::new(py)
            .arg(pyenv::script("ort_load.py"))
            .args(["--opt-level", "disable"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting ort_load.py")?;
        {
            let mut stdin = child.stdin.take().context("stdin")?;
            for (id, a, b) in &pairs {
                writeln!(stdin, "{id}\t{}\t{}", a.display(), b.display())?;
            }
        }
        let output = child.wait_with_output()?;
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("bad line {line}"))?;
            let id = v["id"].as_str().unwrap_or_default().to_string();
            let suite = id.split('/').next().unwrap_or_default();
            let Some(c) = per_suite.iter_mut().find(|(s, _)| **s == suite).map(|(_, c)| c) else { continue };
            let ok = |k: &str| v[k].as_str() == Some("ok");
            match (ok("original"), ok("resaved")) {
                (true, true) => c.ort_both += 1,
                (true, false) => c.ort_original_only.push(format!("{id}: {}", v["resaved"])),
                (false, false) => c.ort_neither += 1,
                (false, true) => c.ort_resaved_only += 1,
            }
        }
    }
    let mut green = true;
    let (mut total, mut equal, mut ort_regress) = (0, 0, 0);
    for (suite, c) in &per_suite {
        println!(
            "{suite:>18}: {} models, {} IR-equal after round trip; ORT loads {} of them both before and after, \
             {} before only, {} neither, {} after only",
            c.models,
            c.ir_equal,
            c.ort_both,
            c.ort_original_only.len(),
            c.ort_neither,
            c.ort_resaved_only
        );
        for f in c.ir_failed.iter().chain(&c.ort_original_only) {
            println!("    FAIL {f}");
        }
        total += c.models;
        equal += c.ir_equal;
        ort_regress += c.ort_original_only.len();
        green &= c.ir_failed.is_empty() && c.ort_original_only.is_empty();
    }
    let failed = total - equal + ort_regress;
    println!("roundtrip: {} passed, {failed} failed", total - failed);
    Ok(green)
}

fn check_one(model: &Path, resaved: &Path) -> Result<()> {
    let first = mppq_onnx::load_model(model)?;
    mppq_onnx::save_model(&first, resaved, &Default::default())?;
    let second = mppq_onnx::load_model(resaved)?;
    if first != second {
        anyhow::bail!("IR differs after save and reload");
    }
    Ok(())
}
