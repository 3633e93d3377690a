//! `cargo xtask`: development tasks of mppq (protobuf generation, ONNX round-trip and
//! conformance runs against the ONNX backend test data, benchmarks against ONNX Runtime).

mod backend_tests;
mod proto;
mod pyenv;
mod roundtrip;
#[cfg(test)]
mod tidy;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "xtask", about = "mppq development tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate crates/mppq-onnx/src/generated/onnx.rs from the ONNX .proto files.
    GenProto,
    /// Load → save → load every backend-test model; check ONNX Runtime loads the saved files.
    Roundtrip {
        /// Backend test data directory (default ../shared/onnx-backend-tests).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Only compare IRs; do not run ONNX Runtime.
        #[arg(long)]
        skip_ort: bool,
    },
    /// Create (or update) the Python reference environment and print its interpreter path.
    Pyenv,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::GenProto => proto::gen_proto(),
        Command::Roundtrip { data, skip_ort } => {
            if roundtrip::run(data.as_deref(), skip_ort)? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::Pyenv => {
            println!("{}", pyenv::python()?.display());
            Ok(())
        }
    }
}
