//! The `mppq` command-line program: a thin clap layer over the `mppq_api` library.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "mppq", version, about = "Post-training quantization of ONNX models")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what a model holds: versions, inputs/outputs, initializers, operator types.
    Info {
        model: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Library errors carry their whole context in one message; print just that.
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info { model, json } => {
            let loaded = mppq_onnx::load_model(&model)?;
            let info = mppq_api::ModelInfo::new(&loaded);
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!("{}\n", model.display());
                print!("{info}");
            }
        }
    }
    Ok(())
}
