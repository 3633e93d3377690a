//! The Python reference environment: a virtualenv at `target/mppq-venv` with the packages of
//! `xtask/python/requirements.txt` (onnxruntime, onnx, numpy), created on first use and
//! recreated when the requirements change.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

use crate::proto::workspace_root;

pub fn venv_dir() -> PathBuf {
    std::env::var_os("MPPQ_VENV").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target/mppq-venv"))
}

pub fn script(name: &str) -> PathBuf {
    workspace_root().join("xtask/python").join(name)
}

/// The venv's python, creating or updating the venv first if needed.
pub fn python() -> Result<PathBuf> {
    let venv = venv_dir();
    let py = venv.join("bin/python");
    let requirements = script("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).context("reading xtask/python/requirements.txt")?;
    let stamp = venv.join("mppq-requirements.txt");
    if py.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(py);
    }
    eprintln!("xtask: creating Python environment {} (onnxruntime, onnx, numpy)…", venv.display());
    let status = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().context("running python3 -m venv")?;
    if !status.success() {
        bail!("python3 -m venv failed (on Debian: apt-get install python3-venv)");
    }
    let status = Command::new(&py)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("pip install -r {} failed", requirements.display());
    }
    std::fs::write(&stamp, wanted)?;
    Ok(py)
}
