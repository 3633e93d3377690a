//! Locating ONNX's backend test data (`../shared/onnx-backend-tests`): suites and their cases.

use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

use crate::proto::workspace_root;

pub const SUITES: [&str; 4] = ["node", "simple", "pytorch-converted", "pytorch-operator"];

/// The backend test data directory: `MPPQ_BACKEND_TESTS`, or `../shared/onnx-backend-tests`.
pub fn data_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let dir = explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("MPPQ_BACKEND_TESTS").map(PathBuf::from))
        .unwrap_or_else(|| workspace_root().join("../shared/onnx-backend-tests"));
    if !dir.join("node").is_dir() {
        bail!("ONNX backend test data not found at {} (set MPPQ_BACKEND_TESTS)", dir.display());
    }
    Ok(dir)
}

/// One test case: `<suite>/<name>/model.onnx` plus its `test_data_set_*` folders.
pub struct Case {
    pub suite: &'static str,
    pub name: String,
    pub dir: PathBuf,
}

impl Case {
    pub fn model(&self) -> PathBuf {
        self.dir.join("model.onnx")
    }
}

/// All cases of the given suites, sorted by name within each suite.
pub fn cases(root: &Path, suites: &[&'static str]) -> Result<Vec<Case>> {
    let mut all = Vec::new();
    for suite in suites {
        let mut names: Vec<_> = std::fs::read_dir(root.join(suite))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("model.onnx").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        all.extend(names.into_iter().map(|name| Case { suite, dir: root.join(suite).join(&name), name }));
    }
    Ok(all)
}
