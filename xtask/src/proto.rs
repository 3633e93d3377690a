//! `cargo xtask gen-proto`: regenerates mppq-onnx's prost code from the checked-in ONNX and Caffe
//! schemas, so no machine ever needs `protoc`. For Caffe it also writes the schema's encoded
//! `FileDescriptorSet`, which the `.prototxt` (protobuf text format) reader needs at run time.

use anyhow::{Context, Result};
use prost::Message;
use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn proto_dir() -> PathBuf {
    workspace_root().join("crates/mppq-onnx/proto")
}

fn generated_dir() -> PathBuf {
    workspace_root().join("crates/mppq-onnx/src/generated")
}

/// The files `gen-proto` writes into `crates/mppq-onnx/src/generated/`.
pub const GENERATED_FILES: [&str; 3] = ["onnx.rs", "caffe.rs", "caffe.fds.bin"];

/// Generates the Rust code for the ONNX and Caffe schemas, and Caffe's descriptor set, into
/// `out_dir` (as [`GENERATED_FILES`]).
pub fn generate_into(out_dir: &Path) -> Result<()> {
    let dir = proto_dir();
    let fds = protox::compile(["onnx/onnx-ml.proto", "onnx/onnx-data.proto"], [&dir])
        .context("compiling the ONNX .proto files with protox")?;
    prost_build::Config::new().out_dir(out_dir).compile_fds(fds).context("generating Rust code with prost-build")?;

    let mut caffe = protox::compile(["caffe/caffe.proto"], [&dir]).context("compiling caffe.proto with protox")?;
    prost_build::Config::new()
        .out_dir(out_dir)
        .compile_fds(caffe.clone())
        .context("generating Rust code for caffe.proto with prost-build")?;
    // The descriptor the text-format reader needs: comments and source positions dropped.
    for file in &mut caffe.file {
        file.source_code_info = None;
    }
    std::fs::write(out_dir.join("caffe.fds.bin"), caffe.encode_to_vec())?;
    Ok(())
}

pub fn gen_proto() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    generate_into(tmp.path())?;
    let target = generated_dir();
    std::fs::create_dir_all(&target)?;
    for name in GENERATED_FILES {
        std::fs::copy(tmp.path().join(name), target.join(name)).with_context(|| format!("copying {name}"))?;
        println!("wrote {}", target.join(name).display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_proto_is_fresh() {
        let tmp = tempfile::tempdir().unwrap();
        super::generate_into(tmp.path()).unwrap();
        for name in super::GENERATED_FILES {
            let fresh = std::fs::read(tmp.path().join(name)).unwrap();
            let checked_in = std::fs::read(super::generated_dir().join(name)).unwrap();
            assert!(fresh == checked_in, "crates/mppq-onnx/src/generated/{name} is stale: run `cargo xtask gen-proto`");
        }
    }
}
