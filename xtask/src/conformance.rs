//! `cargo xtask conformance`: runs ONNX's backend test data through the executor and compares
//! with the stored outputs (rtol 1e-3, atol 1e-7, NaN equal to NaN; integers and booleans
//! exact; documented exception: float16/bfloat16 outputs use rtol 2e-3, i.e. two units in the
//! last place, because the reference computes each step in half precision and a kernel that
//! accumulates in f32 rounds differently). A case is `passed`, `failed` (all its operators are claimed, but the result is wrong
//! or it errors), or `unsupported` (an operator, or an input type, the executor does not
//! handle). The manifest (`xtask/conformance/<backend>.txt`) lists the cases that must pass.

use anyhow::{Context, Result};
use mppq_exec::{Device, ExecError, Executor, OpRegistry, Tensor, Value};
use mppq_onnx::test_data::{DataValue, decode_value_file};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::backend_tests::{self, Case, SUITES};
use crate::proto::workspace_root;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;

/// Documented per-case tolerance exceptions: (case name prefix, atol, why).
const ATOL_EXCEPTIONS: [(&str, f64, &str); 1] = [(
    "test_dft_inverse",
    1e-5,
    "the stored output was made by a float32 FFT: entries whose exact value is 0 carry ~2e-7 of rounding noise",
)];

#[derive(Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
    Unsupported,
}

pub struct Options {
    pub backend: String,
    pub suite: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub filter: Option<String>,
    pub verbose: bool,
    pub write_manifest: bool,
}

pub fn manifest_path(backend: &str) -> PathBuf {
    workspace_root().join("xtask/conformance").join(format!("{backend}.txt"))
}

/// Case names the manifest requires to pass (`suite/case`, `#` comments).
fn read_manifest(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

pub fn run(opts: &Options) -> Result<bool> {
    let device =
        Device::by_name(&opts.backend).with_context(|| format!("unknown or disabled backend `{}`", opts.backend))?;
    let registry = OpRegistry::builtin();
    let (root, suites): (PathBuf, Vec<&'static str>) = match &opts.suite {
        Some(dir) if dir.join("model.onnx").exists() || !dir.join("node").exists() => {
            let suite = SUITES.iter().find(|s| dir.ends_with(s)).copied().unwrap_or("node");
            (dir.parent().map(Path::to_path_buf).unwrap_or_default(), vec![suite])
        }
        other => (backend_tests::data_dir(other.as_deref())?, SUITES.to_vec()),
    };
    let cases: Vec<Case> = backend_tests::cases(&root, &suites)?
        .into_iter()
        .filter(|case| opts.filter.as_ref().is_none_or(|f| case.name.contains(f.as_str())))
        .collect();
    let first = std::env::var(RESUME_FROM).ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let child = std::env::var(RESUME_OUT).ok();
    let mut results: BTreeMap<&str, BTreeMap<String, (Outcome, String)>> = BTreeMap::new();
    let mut next = None;
    for (i, case) in cases.iter().enumerate().skip(first) {
        let (outcome, detail) =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(case, &registry, &device))) {
                Ok(r) => r,
                Err(_) => {
                    // Outside an operator (upload, read-back): as fatal for a GPU as inside one.
                    device.poison(format!("case {} panicked outside the engine", case.name));
                    (Outcome::Failed, "panicked".into())
                }
            };
        if opts.verbose && outcome != Outcome::Passed {
            println!("{:?} {}/{}: {detail}", outcome as u8, case.suite, case.name);
        }
        results.entry(case.suite).or_default().insert(case.name.clone(), (outcome, detail));
        // A backend panic made the (GPU) device unusable in this process: the remaining cases
        // run in a fresh one, so one crashing case does not fail every later one.
        // A child stops there and tells its parent, which starts the next child (one at a time).
        if device.poisoned().is_some() && i + 1 < cases.len() {
            next = Some(i + 1);
            break;
        }
    }
    if let Some(path) = child {
        let rows: Vec<(&str, &String, Outcome, &String)> =
            results.iter().flat_map(|(s, c)| c.iter().map(move |(n, (o, d))| (*s, n, *o, d))).collect();
        std::fs::write(&path, serde_json::to_string(&(rows, next))?).with_context(|| format!("writing {path}"))?;
        return Ok(true);
    }
    while let Some(from) = next {
        let (rows, after) = resume_in_child(from)?;
        for (suite, name, outcome, detail) in rows {
            let suite = SUITES.iter().find(|s| **s == suite).copied().unwrap_or("node");
            results.entry(suite).or_default().insert(name, (outcome, detail));
        }
        next = after;
    }

    let manifest = manifest_path(&opts.backend);
    let required = read_manifest(&manifest);
    let mut json = serde_json::Map::new();
    let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
    for (suite, cases) in &results {
        let count = |o: Outcome| cases.values().filter(|(x, _)| *x == o).count();
        let (p, f, u) = (count(Outcome::Passed), count(Outcome::Failed), count(Outcome::Unsupported));
        println!("{suite:>18}: {p:4} passed, {f:4} failed, {u:4} unsupported (of {})", cases.len());
        passed += p;
        failed += f;
        unsupported += u;
        let case_map: serde_json::Map<String, serde_json::Value> =
            cases.iter().map(|(n, (o, _))| (n.clone(), serde_json::to_value(o).unwrap_or_default())).collect();
        json.insert(
            suite.to_string(),
            serde_json::json!({"passed": p, "failed": f, "unsupported": u, "cases": case_map}),
        );
    }
    let mut missing = Vec::new();
    for name in &required {
        let (suite, case) = name.split_once('/').unwrap_or(("node", name.as_str()));
        match results.get(suite).and_then(|c| c.get(case)) {
            Some((Outcome::Passed, _)) => {}
            Some((o, detail)) => {
                missing.push(format!("{name}: {} ({detail})", serde_json::to_string(o).unwrap_or_default()))
            }
            None if opts.filter.is_some() || opts.suite.is_some() => {}
            None => missing.push(format!("{name}: not found")),
        }
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&serde_json::json!({"suites": json}))?)?;
    }
    if opts.write_manifest {
        let mut lines = vec![
            format!(
                "# Cases that must pass on the `{}` backend (generated by `cargo xtask conformance --write-manifest`).",
                opts.backend
            ),
            "# One `suite/case` per line. CI fails when a listed case does not pass.".to_string(),
        ];
        for (suite, cases) in &results {
            lines.extend(cases.iter().filter(|(_, (o, _))| *o == Outcome::Passed).map(|(n, _)| format!("{suite}/{n}")));
        }
        std::fs::create_dir_all(manifest.parent().context("manifest dir")?)?;
        std::fs::write(&manifest, lines.join("\n") + "\n")?;
        println!("wrote {} ({} cases)", manifest.display(), lines.len() - 2);
    }
    for m in &missing {
        println!("MANIFEST FAIL {m}");
    }
    println!("manifest: {} cases required, {} not passing", required.len(), missing.len());
    println!("unsupported: {unsupported}");
    println!("{passed} passed, {failed} failed");
    Ok(missing.is_empty())
}

/// Environment of a child run that resumes after a poisoned device: the index of its first
/// case (in the filtered order) and the file it writes its outcomes to.
const RESUME_FROM: &str = "MPPQ_CONFORMANCE_RESUME_FROM";
const RESUME_OUT: &str = "MPPQ_CONFORMANCE_RESUME_OUT";

/// Outcomes of a child run, `(suite, case, outcome, detail)`, and where the next child starts
/// (`None`: the child reached the end).
type ChildRun = (Vec<(String, String, Outcome, String)>, Option<usize>);

/// Runs cases `from..` in a child process (same arguments) until the end or until its device is
/// poisoned, and returns its outcomes.
fn resume_in_child(from: usize) -> Result<ChildRun> {
    let out = std::env::temp_dir().join(format!("mppq-conformance-{}-{from}.json", std::process::id()));
    let exe = std::env::current_exe().context("locating the xtask binary to resume the run")?;
    let status = std::process::Command::new(exe)
        // The child writes only its outcomes (no summary, manifest or JSON report).
        .args(std::env::args_os().skip(1))
        .env(RESUME_FROM, from.to_string())
        .env(RESUME_OUT, &out)
        .status()
        .context("starting a fresh process for the remaining cases")?;
    let text = std::fs::read_to_string(&out)
        .with_context(|| format!("child run for cases {from}.. ({status}) wrote no results"))?;
    let _ = std::fs::remove_file(&out);
    Ok(serde_json::from_str(&text)?)
}

fn run_case(case: &Case, registry: &OpRegistry, device: &Device) -> (Outcome, String) {
    let model = match mppq_onnx::load_model(case.model()) {
        Ok(m) => m,
        Err(e) => return (Outcome::Unsupported, format!("load: {e}")),
    };
    // One place decides the opsets mppq accepts: a case past it would pass here and be refused
    // by `mppq run` (it was, for opset 27).
    if let Some(opset) = model.opset("").filter(|o| *o > mppq_onnx::MAX_OPSET) {
        return (
            Outcome::Failed,
            format!("opset {opset} is past mppq_onnx::MAX_OPSET ({}): raise it", mppq_onnx::MAX_OPSET),
        );
    }
    let opsets = |d: &str| model.opset(d).unwrap_or(0);
    let exec = match Executor::new(&model.graph, registry, device, &opsets) {
        Ok(x) => x,
        Err(e @ ExecError::Unsupported { .. }) => return (Outcome::Unsupported, e.to_string()),
        Err(e @ ExecError::Input { .. }) => return (Outcome::Unsupported, e.to_string()),
        Err(e) => return (Outcome::Failed, e.to_string()),
    };
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&case.dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    sets.sort();
    for set in sets {
        let mut feeds = Vec::new();
        for (i, name) in exec.input_names().iter().enumerate() {
            let path = set.join(format!("input_{i}.pb"));
            let data = match decode_value_file(&path, declared_type(&model.graph, name)) {
                Ok(d) => d,
                Err(e) => return (Outcome::Unsupported, format!("input {i}: {e}")),
            };
            match to_value(&data, device) {
                Ok(v) => feeds.push((name.to_string(), v)),
                Err(e) => return (Outcome::Unsupported, format!("input {i}: {e}")),
            }
        }
        let outputs = match exec.run(feeds, &mut []) {
            Ok(o) => o,
            Err(e @ ExecError::NotImplemented { .. }) => return (Outcome::Unsupported, e.to_string()),
            Err(e) => return (Outcome::Failed, e.to_string()),
        };
        for (i, (name, value)) in outputs.iter().enumerate() {
            let path = set.join(format!("output_{i}.pb"));
            let expected = match decode_value_file(&path, declared_type(&model.graph, name)) {
                Ok(d) => d,
                Err(e) => return (Outcome::Unsupported, format!("output {i}: {e}")),
            };
            let atol = ATOL_EXCEPTIONS
                .iter()
                .find(|(prefix, _, _)| case.name.starts_with(prefix))
                .map_or(ATOL, |(_, a, _)| *a);
            if let Err(why) = compare_value(value, &expected, atol) {
                return (Outcome::Failed, format!("output `{name}`: {why}"));
            }
        }
    }
    (Outcome::Passed, String::new())
}

/// The declared type of a graph input or output, which says how its test file is encoded.
fn declared_type<'g>(graph: &'g mppq_ir::Graph, name: &str) -> Option<&'g mppq_ir::ValueType> {
    let id = graph.var_named(name).ok()?;
    graph.variable(id).ok()?.ty.as_ref()
}

/// A decoded test value as an executor value.
fn to_value(data: &DataValue, device: &Device) -> Result<Value, ExecError> {
    Ok(match data {
        DataValue::Tensor(t) => Value::Tensor(Tensor::from_data(t, device)?),
        DataValue::Sequence(items) => {
            let tensors = items
                .iter()
                .map(|d| match d {
                    DataValue::Tensor(t) => Tensor::from_data(t, device),
                    _ => Err(ExecError::Input {
                        name: String::new(),
                        message: "sequences of non-tensors are not supported".into(),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Value::Sequence(tensors)
        }
        DataValue::Optional(None) => Value::Optional(None),
        DataValue::Optional(Some(inner)) => Value::Optional(Some(Box::new(to_value(inner, device)?))),
    })
}

/// Compares an executor value with an expected test value (same structure; tensors by [`compare`]).
fn compare_value(actual: &Value, expected: &DataValue, atol: f64) -> Result<(), String> {
    match (actual, expected) {
        (Value::Tensor(a), DataValue::Tensor(e)) => compare(a, e, atol),
        (Value::Sequence(a), DataValue::Sequence(e)) => {
            if a.len() != e.len() {
                return Err(format!("sequence of {} tensors but expected {}", a.len(), e.len()));
            }
            for (k, (a, e)) in a.iter().zip(e).enumerate() {
                let DataValue::Tensor(e) = e else {
                    return Err(format!("sequence element {k}: expected a non-tensor"));
                };
                compare(a, e, atol).map_err(|why| format!("sequence element {k}: {why}"))?;
            }
            Ok(())
        }
        (Value::Optional(None), DataValue::Optional(None)) => Ok(()),
        (Value::Optional(Some(a)), DataValue::Optional(Some(e))) => compare_value(a, e, atol),
        (Value::Optional(a), DataValue::Optional(e)) => Err(format!(
            "optional {} but expected {}",
            if a.is_some() { "has a value" } else { "is empty" },
            if e.is_some() { "a value" } else { "none" }
        )),
        (a, _) => Err(format!("got a {} but expected a {}", value_kind(a), data_kind(expected))),
    }
}

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Tensor(_) => "tensor",
        Value::Sequence(_) => "sequence",
        Value::Optional(_) => "optional",
    }
}

fn data_kind(v: &DataValue) -> &'static str {
    match v {
        DataValue::Tensor(_) => "tensor",
        DataValue::Sequence(_) => "sequence",
        DataValue::Optional(_) => "optional",
    }
}

fn compare(actual: &Tensor, expected: &mppq_ir::TensorData, atol: f64) -> Result<(), String> {
    if actual.dtype() != expected.dtype() {
        return Err(format!("dtype {} but expected {}", actual.dtype(), expected.dtype()));
    }
    if actual.shape() != expected.shape() {
        return Err(format!("shape {:?} but expected {:?}", actual.shape(), expected.shape()));
    }
    let got = actual.to_f64_vec();
    let want: Vec<f64> = match expected.dtype() {
        d if d.is_float() => {
            expected.to_f32_vec().map(|v| v.into_iter().map(f64::from).collect()).map_err(|e| e.to_string())?
        }
        mppq_ir::DataType::Double => expected.to_vec::<f64>().map_err(|e| e.to_string())?,
        _ => expected.to_i64_vec().map_err(|e| e.to_string())?.into_iter().map(|v| v as f64).collect(),
    };
    let exact = !expected.dtype().is_float();
    let rtol = match expected.dtype() {
        mppq_ir::DataType::Float16 | mppq_ir::DataType::BFloat16 => 2e-3,
        _ => RTOL,
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok =
            if exact { g == w } else { (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs() };
        if !ok {
            return Err(format!("element {i}: got {g}, expected {w}"));
        }
    }
    Ok(())
}
