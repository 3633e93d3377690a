//! CPU classes the checks run ONNX Runtime on. ORT's integer kernels differ by class (x86 without
//! VNNI adds weight pairs in a saturating int16; VNNI and ARM64 do not), so an export is proven
//! on each class we can reach, never on the host's alone:
//! - `host`: this machine, natively (its class is printed with the results);
//! - `x86-avx2`: ORT under `qemu-x86_64 -cpu Haswell` (user-mode emulation: AVX2, no AVX-512,
//!   no VNNI), which reaches MLAS's `vpmaddubsw` kernels on any x86-64 host, about 10× slower.
//!
//! A lane that cannot run here (no qemu, not an x86-64 host) is an error, never skipped.

use anyhow::{Result, bail};
use mppq_quant::quantizer::TargetCpu;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuLane {
    Host,
    X86Avx2,
}

impl CpuLane {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "host" => Ok(Self::Host),
            "x86-avx2" => Ok(Self::X86Avx2),
            other => bail!("unknown CPU lane `{other}`: host or x86-avx2"),
        }
    }

    /// A command running `python` in this lane (under qemu for `x86-avx2` unless the host is of
    /// that class already: the venv's site-packages then come through PYTHONPATH, since qemu
    /// starts the interpreter from its real path).
    pub fn python(self, python: &Path) -> Result<Command> {
        if self == Self::Host || TargetCpu::host() == TargetCpu::X86Avx2 {
            return Ok(Command::new(python));
        }
        if !cfg!(target_arch = "x86_64") {
            bail!("the x86-avx2 lane emulates an x86-64 CPU with qemu-x86_64 on an x86-64 host only");
        }
        if which("qemu-x86_64").is_none() {
            bail!("the x86-avx2 lane needs qemu-x86_64 (Debian: apt-get install qemu-user)");
        }
        let real = std::fs::canonicalize(python)?;
        let venv = python.parent().and_then(Path::parent).unwrap_or(Path::new("."));
        let site = std::fs::read_dir(venv.join("lib"))?
            .filter_map(|e| e.ok().map(|e| e.path().join("site-packages")))
            .find(|p| p.is_dir());
        let Some(site) = site else { bail!("no site-packages under {}", venv.join("lib").display()) };
        let mut cmd = Command::new("qemu-x86_64");
        // qemu warns on stderr about every host CPU feature TCG cannot give the guest: callers
        // capture stderr and drop those lines.
        cmd.args(["-cpu", "Haswell"]).arg(real).env("PYTHONPATH", site);
        Ok(cmd)
    }
}

impl std::fmt::Display for CpuLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host => write!(f, "host ({})", TargetCpu::host()),
            Self::X86Avx2 => f.write_str("x86-avx2 (qemu Haswell)"),
        }
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file()))
}
