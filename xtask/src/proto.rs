//! `cargo xtask gen-proto`: regenerates mppq-onnx's prost code from the checked-in ONNX schema,
//! so no machine ever needs `protoc`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn proto_dir() -> PathBuf {
    workspace_root().join("crates/mppq-onnx/proto")
}

pub fn generated_file() -> PathBuf {
    workspace_root().join("crates/mppq-onnx/src/generated/onnx.rs")
}

/// Generates the Rust code for the ONNX schema into `out_dir` (as `onnx.rs`).
pub fn generate_into(out_dir: &Path) -> Result<PathBuf> {
    let dir = proto_dir();
    let fds = protox::compile(["onnx/onnx-ml.proto", "onnx/onnx-data.proto"], [&dir])
        .context("compiling the ONNX .proto files with protox")?;
    prost_build::Config::new().out_dir(out_dir).compile_fds(fds).context("generating Rust code with prost-build")?;
    Ok(out_dir.join("onnx.rs"))
}

pub fn gen_proto() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let generated = generate_into(tmp.path())?;
    let target = generated_file();
    std::fs::create_dir_all(target.parent().context("generated file has a parent")?)?;
    std::fs::copy(&generated, &target)?;
    println!("wrote {}", target.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_proto_is_fresh() {
        let tmp = tempfile::tempdir().unwrap();
        let fresh = std::fs::read_to_string(super::generate_into(tmp.path()).unwrap()).unwrap();
        let checked_in = std::fs::read_to_string(super::generated_file()).unwrap();
        assert!(fresh == checked_in, "crates/mppq-onnx/src/generated/onnx.rs is stale: run `cargo xtask gen-proto`");
    }
}
