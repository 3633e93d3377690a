//! Repository rules, checked as plain tests: every module opens with a `//!` line, the crate
//! stack is respected (a crate depends only on crates to its left), internal dependencies carry
//! versions (so the crates can be published), manifests declare the dependencies the code really
//! has (test-only ones as dev-dependencies), no test expects a panic (errors are asserted as
//! values), and passes name no operator type the role table knows (they ask the table).

use crate::proto::workspace_root;
use std::path::{Path, PathBuf};

/// The crate stack, bottom first.
const STACK: [&str; 9] = [
    "mppq-ir",
    "mppq-onnx",
    "mppq-exec",
    "mppq-dispatch",
    "mppq-quant",
    "mppq-passes",
    "mppq-export",
    "mppq-api",
    "mppq-py",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            // Generated code is included into a documented module, not a module itself.
            if p.file_name().is_some_and(|n| n == "generated") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn all_sources() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["crates", "xtask/src", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    files
}

#[test]
fn every_module_starts_with_a_doc_line() {
    let missing: Vec<String> = all_sources()
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "src"))
        .filter(|p| !std::fs::read_to_string(p).unwrap_or_default().starts_with("//!"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "modules without a leading `//!` line:\n{}", missing.join("\n"));
}

/// `mppq-*` names in the dependency sections of a manifest.
fn internal_deps(manifest: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        if section.ends_with("dependencies")
            && let Some(name) = line.split(['=', '.', ' ']).next().filter(|n| n.starts_with("mppq-"))
        {
            deps.push((name.to_string(), line.to_string()));
        }
    }
    deps
}

#[test]
fn crates_respect_the_stack_and_versions() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for (level, krate) in STACK.iter().enumerate() {
        let manifest = std::fs::read_to_string(root.join("crates").join(krate).join("Cargo.toml")).unwrap_or_default();
        for (dep, line) in internal_deps(&manifest) {
            match STACK.iter().position(|s| *s == dep) {
                Some(l) if l < level => {}
                _ => problems.push(format!("{krate} depends on {dep}, which is not below it in the stack")),
            }
            if !line.contains("workspace = true") && !line.contains("version") {
                problems.push(format!("{krate}: dependency on {dep} has no version"));
            }
        }
    }
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    // The Python binding is shipped as a wheel, not a crate: nothing depends on it.
    for krate in STACK.iter().filter(|k| **k != "mppq-py") {
        let line = workspace.lines().find(|l| l.starts_with(&format!("{krate} =")));
        if !line.is_some_and(|l| l.contains("version")) {
            problems.push(format!("workspace dependency {krate} has no version"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_should_panic_tests() {
    let needle = ["#[should", "_panic"].concat();
    let offenders: Vec<String> = all_sources()
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).unwrap_or_default().contains(&needle))
        .map(|p| p.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "tests must assert errors, not panics: {offenders:?}");
}

/// Names in one dependency section (`[dependencies]`, `[dev-dependencies]`) of a manifest.
fn section_deps(manifest: &str, wanted: &str) -> Vec<String> {
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
        } else if section == wanted
            && let Some(name) = line.split(['=', '.', ' ']).next().filter(|n| !n.is_empty() && !n.starts_with('#'))
        {
            deps.push(name.to_string());
        }
    }
    deps
}

fn mentions(files: &[PathBuf], krate: &str) -> bool {
    let ident = krate.replace('-', "_");
    files.iter().any(|p| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        text.contains(&format!("{ident}::"))
            || text.contains(&format!("use {ident}"))
            || text.contains(&format!("{ident} as"))
    })
}

/// A crate's `[dependencies]` are what its library and binaries use; what only tests, examples
/// and doc examples use is a dev-dependency (so users do not compile, say, Burn for a doc example).
#[test]
fn manifests_declare_the_dependencies_the_code_has() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for krate in STACK {
        let dir = root.join("crates").join(krate);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let mut code = Vec::new();
        rust_files(&dir.join("src"), &mut code);
        // Code of the library and binaries: no `#[cfg(test)]` modules' files and no doc comments.
        let code: Vec<PathBuf> = code
            .into_iter()
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                !(name == "tests.rs" || name.ends_with("_tests.rs") || name == "test_graphs.rs")
            })
            .collect();
        for dep in section_deps(&manifest, "dependencies") {
            if !mentions(&code, &dep) {
                problems.push(format!("{krate}: `{dep}` is a dependency, but only tests or docs use it (or nothing)"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Operator types a pass may still name, per file, and why: each is knowledge of that operator's
/// own semantics (its attributes, an operator the pass builds, a user setting's default), not a
/// class of operators, which the role table (`mppq_ir::roles`) holds.
const OP_TYPES_NAMED_IN_PASSES: &[(&str, &[&str], &str)] = &[
    ("calibration/mixed_range_concat.rs", &["Concat"], "the pass decides about Concats themselves"),
    (
        "calibration/quant_alignment.rs",
        &["Add", "Concat"],
        "the runtimes' alignment rules are per operator (shared scales of Concat, Add's inputs)",
    ),
    (
        "optimisation/equalization.rs",
        &[
            "Relu",
            "Clip",
            "MaxPool",
            "AveragePool",
            "GlobalMaxPool",
            "GlobalAveragePool",
            "Identity",
            "Flatten",
            "Conv",
            "Gemm",
        ],
        "which operators commute with a positive per-channel scale is their arithmetic, not a role; \
         high-bias absorption reads Conv's padding attributes",
    ),
    ("optimisation/isotone_calibration.rs", &["Softmax"], "the pass calibrates Softmax outputs"),
    (
        "configuration/transformer_blocks.rs",
        &["Softmax", "Add"],
        "attention is found from its Softmax; the report tells bias and residual additions apart",
    ),
    (
        "optimisation/smooth_quant.rs",
        &["LayerNormalization", "Mul"],
        "it folds the smoothing scale into a LayerNormalization's or a Mul's constant, or inserts a Mul",
    ),
    ("setting.rs", &["Relu", "Clip"], "the default of the user's `fusion.activations` list"),
    ("structural/quant_fusion.rs", &["Relu", "Clip"], "the default of the user's `fusion.activations` list"),
];

/// The string literals of `code` outside comments and `#[cfg(test)]` modules (the tail of a file).
fn string_literals(code: &str) -> Vec<String> {
    let product = code.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = Vec::new();
    for line in product.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut parts = line.split('"');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push(inside.to_string());
        }
    }
    out
}

/// Passes ask the role table what an operator is (`op_roles(op).is(OpClass::WeightedLinear)`,
/// its weight, bias and channel axes) instead of listing operator types: adding an operator to
/// the table then teaches every pass. The exceptions are listed above, each with its reason.
#[test]
fn passes_ask_the_role_table_instead_of_naming_operator_types() {
    let known = mppq_api::ir::roles::table_op_types();
    let src = workspace_root().join("crates/mppq-passes/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    let mut used: Vec<(String, String)> = Vec::new();
    for path in files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "tests.rs" || name.ends_with("_tests.rs") || name == "test_graphs.rs" {
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let allowed = OP_TYPES_NAMED_IN_PASSES.iter().find(|(file, ..)| *file == relative).map(|(_, t, _)| *t);
        let code = std::fs::read_to_string(&path).unwrap_or_default();
        for literal in string_literals(&code) {
            if !known.contains(&literal.as_str()) {
                continue;
            }
            if allowed.is_some_and(|a| a.contains(&literal.as_str())) {
                used.push((relative.clone(), literal));
            } else {
                problems.push(format!("{relative}: names operator type `{literal}` (ask mppq_ir::op_roles instead)"));
            }
        }
    }
    // An exception nobody needs any more goes, so the list stays the truth.
    for (file, types, _) in OP_TYPES_NAMED_IN_PASSES {
        for t in *types {
            if !used.iter().any(|(f, u)| f == file && u == t) {
                problems.push(format!("{file}: `{t}` is allowed but no longer named: remove the exception"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
