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
    /// Show which precision every operation would run in, and which rule decided it.
    Dispatch {
        model: PathBuf,
        /// allin, conservative, aggressive, pointwise, perseus (or a registered one).
        #[arg(long, default_value = "conservative")]
        dispatcher: String,
        /// Operation types or name globs (e.g. `Softmax`, `blocks.0.*`) forced to FP32.
        #[arg(long)]
        ignore: Vec<String>,
    },
    /// Run a model on inputs from an .npz (keys = input names) or .npy file; write each output
    /// as OUT_DIR/<output name>.npy.
    Run {
        model: PathBuf,
        #[arg(long)]
        input: PathBuf,
        #[arg(short, long, default_value = "mppq_out")]
        output: PathBuf,
        /// Compute device: cpu, or wgpu when built with the `wgpu` feature.
        #[arg(long, default_value = "cpu")]
        device: String,
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
        Command::Dispatch { model, dispatcher, ignore } => {
            use mppq_quant::quantizer::Quantizer;
            let loaded = mppq_onnx::load_model(&model)?;
            let quantizer = mppq_quant::quantizer::OnnxRuntimeQuantizer::default();
            let mut scope = mppq_dispatch::IgnoredScope::default();
            for item in ignore {
                // A name glob if it has glob characters or dots, else an operator type.
                scope = if item.contains(['*', '?', '.']) { scope.with_name(item) } else { scope.with_type(item) };
            }
            let ctx = mppq_dispatch::DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types())
                .with_ignored(scope);
            let decisions = mppq_dispatch::dispatcher_by_name(&dispatcher)?.dispatch(&loaded.graph, &ctx)?;
            print!("{decisions}");
        }
        Command::Run { model, input, output, device } => {
            let device = mppq_exec::Device::by_name(&device)
                .ok_or_else(|| anyhow::anyhow!("unknown device `{device}` (cpu, or wgpu when built with it)"))?;
            let loaded = mppq_onnx::load_model(&model)?;
            let feeds = mppq_api::run::read_feeds(&loaded, &input)?;
            let outputs = mppq_api::run::run_model(&loaded, feeds, &device)?;
            std::fs::create_dir_all(&output).map_err(|e| anyhow::anyhow!("cannot create `{}`: {e}", output.display()))?;
            for (name, data) in outputs {
                let path = output.join(mppq_api::run::output_file_name(&name));
                mppq_api::npy::write_npy(&path, &data)?;
                println!("{name}: {} {:?} -> {}", data.dtype(), data.shape(), path.display());
            }
        }
    }
    Ok(())
}
