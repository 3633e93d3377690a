//! The `mppq` command-line program: a thin clap layer over the `mppq_api` library.

mod progress;

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
        /// Target platform (`mppq platforms`): its quantizer and dispatcher, as `quantize` uses them.
        #[arg(long)]
        platform: Option<String>,
        /// allin, conservative, aggressive, pointwise, perseus (or a registered one); the
        /// platform's own when left out.
        #[arg(long)]
        dispatcher: Option<String>,
        /// Operation types or name globs (e.g. `Softmax`, `blocks.0.*`) forced to FP32.
        #[arg(long)]
        ignore: Vec<String>,
        /// A setting file (TOML or JSON) as `quantize` takes it; the flags above override it.
        #[arg(long)]
        setting: Option<PathBuf>,
    },
    /// Run a model on inputs from an .npz (keys = input names) or .npy file, or on every such
    /// file of a directory; write each output as `OUT_DIR/<output name>.npy` (`OUT_DIR/<file>/...` for a
    /// directory). With --quant-config, run the quantization simulation of that config.
    Run {
        model: PathBuf,
        #[arg(long)]
        input: PathBuf,
        #[arg(short, long, default_value = "mppq_out")]
        output: PathBuf,
        /// Compute device (wgpu: a build with the `wgpu` feature).
        #[arg(long, value_enum, default_value = "cpu")]
        device: mppq_api::quantize::setting::DeviceKind,
        /// A quant.json written by `mppq quantize`: simulate that quantization (no recalibration).
        #[arg(long)]
        quant_config: Option<PathBuf>,
        /// Largest tensor (MiB) an operator may allocate from computed sizes (default: half the
        /// physical memory).
        #[arg(long, value_name = "MIB")]
        max_tensor_mib: Option<u64>,
    },
    /// Quantize a model: runs the exporters into OUT_DIR (by default model.qdq.onnx, quant.json,
    /// model.float.onnx), writes OUT_DIR/report.html, lists every file written and prints the
    /// graph-wise error summary.
    Quantize {
        model: PathBuf,
        #[command(flatten)]
        quant: QuantArgs,
        #[arg(short, long, default_value = "mppq_out")]
        output: PathBuf,
        /// Print the effective setting (TOML) before quantizing.
        #[arg(long)]
        print_setting: bool,
    },
    /// Quantize in memory and report the error: graph-wise (each quantized computing op's
    /// output and every graph output) and, with --layerwise, one op quantized at a time.
    Analyse {
        model: PathBuf,
        #[command(flatten)]
        quant: QuantArgs,
        /// Analyse this quantization (a quant.json) instead of calibrating.
        #[arg(long)]
        quant_config: Option<PathBuf>,
        /// Write report.json and report.html here.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List the registered platforms.
    Platforms,
    /// List the registered exporters and their options.
    Exporters,
    /// List the registered model parsers (formats `quantize` and `analyse` read).
    Parsers,
}

/// Flags shared by `quantize` and `analyse`; each overrides the setting file.
#[derive(clap::Args)]
struct QuantArgs {
    /// Calibration data: a directory (searched recursively, sorted by path) of .npy
    /// (single-input models) or .npz batches (keys = input names), raw .bin files (see
    /// --input-shape) or images (JPEG, PNG, BMP; see the image options), or one such file.
    #[arg(long)]
    calib: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// A setting file (.toml or .json) with every knob; flags below override it.
    #[arg(long)]
    setting: Option<PathBuf>,
    /// Target platform (see `mppq platforms`).
    #[arg(long)]
    platform: Option<String>,
    /// Dispatcher: allin, conservative, aggressive, pointwise, perseus (default: the platform's).
    #[arg(long)]
    dispatcher: Option<String>,
    /// Activation bits (platforms that allow a choice, e.g. lowbit).
    #[arg(long)]
    bits: Option<u32>,
    /// Weight bits.
    #[arg(long)]
    weight_bits: Option<u32>,
    /// Block-wise weights (the `weight-only` platform): elements per block along the input
    /// channels, a power of two of at least 16 (default 128).
    #[arg(long, value_name = "N")]
    block_size: Option<usize>,
    /// Weight bits of the first and last weighted layers when the others get fewer (8 is what
    /// AdaRound, BRECQ and MQBench keep them at in their low-bit results).
    #[arg(long, value_name = "BITS")]
    edge_weight_bits: Option<u32>,
    /// ONNX Runtime's reduce_range: 7-bit weights (exact on every CPU, half the resolution).
    #[arg(long)]
    reduce_range: bool,
    /// The CPU class the export must compute exactly on (ONNX Runtime platforms): any (default:
    /// 8-bit weights within the pair limit of x86 CPUs without VNNI), x86-avx2, x86-vnni, arm64.
    /// `mppq info` names this machine's class.
    #[arg(long, value_name = "CLASS", value_parser = parse_target_cpu)]
    target_cpu: Option<mppq_api::quant::quantizer::TargetCpu>,
    #[arg(long, conflicts_with = "per_tensor")]
    per_channel: bool,
    #[arg(long)]
    per_tensor: bool,
    #[arg(long, conflicts_with = "asymmetric")]
    symmetric: bool,
    #[arg(long)]
    asymmetric: bool,
    /// Activation observer: minmax, percentile, kl, mse, isotone, constant, floating, hist.
    #[arg(long, value_parser = parse_observer)]
    observer: Option<mppq_api::ir::quant::ObserverKind>,
    /// Use at most N calibration batches.
    #[arg(long)]
    calib_steps: Option<usize>,
    /// Optimisation level: 0 = calibration only; 1 = + isotone Softmax calibration (default);
    /// 2 = + equalization, SmoothQuant, range search and bias correction; 3 = + block
    /// reconstruction (learned rounding of weights; minutes). Each pass is measured on the
    /// calibration data and undone when it lowers the output SNR.
    #[arg(long, value_name = "LEVEL")]
    optimize: Option<u8>,
    /// Accuracy budget: give the most damaging operations back to float until the graph
    /// outputs' SNR on the calibration data reaches DB (each one is reported).
    #[arg(long, value_name = "DB")]
    target_snr: Option<f64>,
    /// Accuracy budget: give at most N operations back to float (alone: the N most damaging
    /// ones, each only where it raises the SNR).
    #[arg(long, value_name = "N")]
    max_float_ops: Option<usize>,
    /// Operation types or name globs kept in FP32 (repeatable).
    #[arg(long)]
    ignore: Vec<String>,
    /// Also run the layer-wise analysis (one op quantized at a time).
    #[arg(long)]
    layerwise: bool,
    /// Compute device (wgpu: a build with the `wgpu` feature).
    #[arg(long, value_enum)]
    device: Option<mppq_api::quantize::setting::DeviceKind>,
    /// Largest tensor (MiB) an operator may allocate from computed sizes (default: half the
    /// physical memory); larger is an error naming the node.
    #[arg(long, value_name = "MIB")]
    max_tensor_mib: Option<u64>,
    /// Exporter to run (repeatable; see `mppq exporters`); the platform's defaults when absent.
    /// Options go in the setting file's `[export.NAME]` section.
    #[arg(long = "export", value_name = "NAME")]
    exporters: Vec<String>,
    /// Ranges calibrated by another tool, replacing ours for the tensors the file names: QNN/AIMET
    /// encodings (0.6.1, 1.0.0, 2.x), ONNX Runtime's calibration cache, TensorRT's
    /// calibration.cache or dynamic-range JSON (recognised by content).
    #[arg(long, value_name = "FILE")]
    import_ranges: Option<PathBuf>,
    /// The weights of a model format that keeps them apart: a Caffe network's `.caffemodel`
    /// (default: NAME.caffemodel beside NAME.prototxt). See `mppq parsers`.
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
    /// More output: the dispatch table and each pass's report.
    #[arg(short, long, conflicts_with = "quiet")]
    verbose: bool,
    /// No progress bars and no summary table.
    #[arg(short, long)]
    quiet: bool,
}

/// How calibration files become input tensors; each overrides the setting file's `[data]`.
#[derive(clap::Args)]
#[command(next_help_heading = "Calibration data")]
struct DataArgs {
    /// Images per batch (default: the input's fixed batch size, else 1). A partial last batch is
    /// kept for a dynamic batch dimension, dropped (and said) for a fixed one.
    #[arg(long, value_name = "N")]
    batch: Option<usize>,
    /// Shape of raw .bin inputs: `1,3,224,224` (the only input) or `NAME:1,3,224,224`
    /// (repeatable); needed when the model does not declare it.
    #[arg(long, value_name = "SHAPE", value_parser = parse_input_shape)]
    input_shape: Vec<(String, Vec<usize>)>,
    /// Resize images: `S` (shorter side, aspect kept) or `WxH` (exact).
    #[arg(long, value_name = "SIZE")]
    resize: Option<String>,
    /// Fit images inside `WxH` keeping the aspect ratio, padded with --pad-value (YOLO).
    #[arg(long, value_name = "WxH")]
    letterbox: Option<String>,
    /// Center crop after resizing: `S` or `WxH`.
    #[arg(long, value_name = "SIZE")]
    crop: Option<String>,
    /// Resampling filter (Pillow's numbers).
    #[arg(long, value_enum)]
    interpolation: Option<mppq_api::data::calib::Interpolation>,
    /// Letterbox padding value (default 114).
    #[arg(long, value_name = "V")]
    pad_value: Option<u8>,
    /// Channel order of the input.
    #[arg(long, value_enum)]
    channels: Option<mppq_api::data::calib::Channels>,
    /// Layout of the input.
    #[arg(long, value_enum)]
    layout: Option<mppq_api::data::calib::Layout>,
    /// Multiplies 8-bit values before mean/std (default 1/255 = 0.00392156862745098).
    #[arg(long, value_name = "S")]
    scale: Option<f32>,
    /// Per-channel mean subtracted after scaling: `0.485,0.456,0.406` or one value.
    #[arg(long, value_name = "M,..", value_delimiter = ',', allow_negative_numbers = true)]
    mean: Option<Vec<f32>>,
    /// Per-channel std dividing after the mean: `0.229,0.224,0.225` or one value.
    #[arg(long, value_name = "S,..", value_delimiter = ',')]
    std: Option<Vec<f32>>,
}

impl DataArgs {
    fn apply(&self, d: &mut mppq_api::data::calib::DataSetting) {
        d.batch = self.batch.or(d.batch);
        for (name, shape) in &self.input_shape {
            d.input_shape.insert(name.clone(), shape.clone());
        }
        let i = &mut d.image;
        if self.resize.is_some() {
            i.resize = self.resize.clone();
        }
        if self.letterbox.is_some() {
            i.letterbox = self.letterbox.clone();
        }
        if self.crop.is_some() {
            i.crop = self.crop.clone();
        }
        i.interpolation = self.interpolation.unwrap_or(i.interpolation);
        i.pad_value = self.pad_value.unwrap_or(i.pad_value);
        i.channels = self.channels.unwrap_or(i.channels);
        i.layout = self.layout.unwrap_or(i.layout);
        i.scale = self.scale.unwrap_or(i.scale);
        if let Some(m) = &self.mean {
            i.mean = m.clone();
        }
        if let Some(s) = &self.std {
            i.std = s.clone();
        }
    }
}

fn parse_input_shape(s: &str) -> std::result::Result<(String, Vec<usize>), String> {
    let (name, dims) = s.rsplit_once(':').unwrap_or(("", s));
    let shape: Option<Vec<usize>> = dims.split([',', 'x']).map(|d| d.trim().parse().ok()).collect();
    match shape {
        Some(shape) if !shape.is_empty() => Ok((name.to_string(), shape)),
        _ => Err(format!("`{s}`: expected dims like 1,3,224,224 or NAME:1,3,224,224")),
    }
}

impl QuantArgs {
    /// The setting file (or the defaults) with the flags applied on top.
    fn setting(&self) -> Result<mppq_api::QuantizeSetting> {
        let mut s = match &self.setting {
            Some(path) => mppq_api::QuantizeSetting::from_file(path)?,
            None => mppq_api::QuantizeSetting::default(),
        };
        if let Some(p) = &self.platform {
            s.platform = p.clone();
        }
        self.data.apply(&mut s.data);
        if self.dispatcher.is_some() {
            s.dispatcher = self.dispatcher.clone();
        }
        let q = &mut s.quantizer;
        q.bits = self.bits.or(q.bits);
        q.weight_bits = self.weight_bits.or(q.weight_bits);
        q.block_size = self.block_size.or(q.block_size);
        if self.reduce_range {
            q.reduce_range = Some(true);
        }
        q.target_cpu = self.target_cpu.or(q.target_cpu);
        if self.per_channel || self.per_tensor {
            q.per_channel = Some(self.per_channel);
        }
        if self.symmetric || self.asymmetric {
            q.symmetric = Some(self.symmetric);
        }
        if self.observer.is_some() {
            q.observer = self.observer;
        }
        if self.calib_steps.is_some() {
            s.pipeline.calibration.steps = self.calib_steps;
        }
        if self.edge_weight_bits.is_some() {
            s.pipeline.edge_weight_bits = self.edge_weight_bits;
        }
        if let Some(level) = self.optimize {
            s.pipeline.optimize = level;
        }
        if self.target_snr.is_some() {
            s.budget.target_snr = self.target_snr;
        }
        if self.max_float_ops.is_some() {
            s.budget.max_float_ops = self.max_float_ops;
        }
        s.ignore.extend(self.ignore.iter().cloned());
        s.analysis.layerwise |= self.layerwise;
        if let Some(d) = &self.device {
            s.device = *d;
        }
        s.max_tensor_mib = self.max_tensor_mib.or(s.max_tensor_mib);
        if !self.exporters.is_empty() {
            s.exporters = Some(self.exporters.clone());
        }
        if self.import_ranges.is_some() {
            s.import_ranges = self.import_ranges.clone();
        }
        if self.weights.is_some() {
            s.weights = self.weights.clone();
        }
        Ok(s)
    }

    fn progress(&self) -> Box<dyn mppq_passes::ProgressSink> {
        if self.quiet { Box::new(mppq_passes::NoProgress) } else { Box::new(progress::TerminalProgress::new()) }
    }
}

fn parse_target_cpu(s: &str) -> std::result::Result<mppq_api::quant::quantizer::TargetCpu, String> {
    use mppq_api::quant::quantizer::TargetCpu;
    TargetCpu::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = TargetCpu::ALL.iter().map(|c| c.name()).collect();
        format!("unknown CPU class `{s}`: use one of {}", names.join(", "))
    })
}

fn parse_observer(s: &str) -> std::result::Result<mppq_api::ir::quant::ObserverKind, String> {
    s.parse()
}

/// Exit codes: 0 success; 1 an error in what the user gave (model, data, flags, setting; the
/// message says what and how to fix it); 2 an internal error (a bug in mppq: please report it);
/// clap's own 2 for unparseable command lines.
fn main() -> std::process::ExitCode {
    // Passes reuse the pages of the last pass's tensors instead of faulting new ones in.
    mppq_api::exec::allocator::retain_freed_memory();
    let cli = Cli::parse();
    std::panic::set_hook(Box::new(|info| {
        // `mppq info m.onnx | head`: the reader left, so `println!` panics on the closed pipe.
        // Not a bug: end quietly, with the status a process killed by SIGPIPE has.
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        eprintln!("internal error (a bug in mppq {}; please report it): {info}", env!("CARGO_PKG_VERSION"));
    }));
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            // Library errors carry their whole context in one message; print just that.
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
        Err(_) => std::process::ExitCode::from(2),
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info { model, json } => {
            let loaded = mppq_api::platform::parser::parse_model(&model, None)?;
            let info = mppq_api::ModelInfo::new(&loaded);
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!("{}\n", model.display());
                print!("{info}");
                let host = mppq_api::quant::quantizer::TargetCpu::host();
                println!("this machine's CPU class: {host} ({}); exports default to `any`", host.describe());
            }
        }
        Command::Dispatch { model, platform, dispatcher, ignore, setting } => {
            // The dispatch `quantize` decides: same platform, setting, admission and fusions.
            let mut setting = match &setting {
                Some(path) => mppq_api::QuantizeSetting::from_file(path)?,
                None => mppq_api::QuantizeSetting::default(),
            };
            setting.platform = platform.unwrap_or(setting.platform);
            setting.dispatcher = dispatcher.or(setting.dispatcher);
            setting.ignore.extend(ignore);
            let quantizer = mppq_api::load_quantizer(&model, setting)?;
            print!("{}", quantizer.preview_dispatch()?);
        }
        Command::Run { model, input, output, device, quant_config, max_tensor_mib } => {
            if let Some(mib) = max_tensor_mib {
                mppq_api::exec::budget::set_max_tensor_bytes(mib.saturating_mul(1 << 20));
            }
            let device = device.device()?;
            let loaded = mppq_api::model::run::load_for_run(&model, quant_config.as_deref())?;
            // Outputs are staged and appear together at the end, never over an input.
            let staging = mppq_api::staging::Staging::new(&output, &[&model, &input])?;
            let files = mppq_api::model::run::input_files(&input)?;
            let mut written = Vec::new();
            for file in &files {
                let sub =
                    if input.is_dir() { PathBuf::from(file.file_stem().unwrap_or_default()) } else { PathBuf::new() };
                let out_dir = staging.path().join(&sub);
                let feeds = mppq_api::model::run::read_feeds(&loaded, file)?;
                let outputs = mppq_api::model::run::run_model_with(&loaded, feeds, &device, quant_config.is_some())?;
                std::fs::create_dir_all(&out_dir)
                    .map_err(|e| anyhow::anyhow!("cannot create `{}`: {e}", out_dir.display()))?;
                let names: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
                for ((name, data), file_name) in outputs.iter().zip(mppq_api::model::run::output_file_names(&names)) {
                    let path = out_dir.join(file_name);
                    mppq_api::data::npy::write_npy(&path, data)?;
                    written.push((format!("{name}: {} {:?}", data.dtype(), data.shape()), path));
                }
            }
            for (what, path) in staging.commit(written)? {
                println!("{what} -> {}", path.display());
            }
        }
        Command::Quantize { model, quant, output, print_setting } => {
            let setting = quant.setting()?;
            if print_setting {
                println!("{}", setting.to_toml()?);
            }
            let mut progress = quant.progress();
            let job = mppq_api::quantize::quantize_to_dir(&model, &quant.calib, setting, &output, progress.as_mut())?;
            print_job(&job, quant.verbose, quant.quiet);
        }
        Command::Analyse { model, quant, quant_config, output } => {
            let setting = quant.setting()?;
            let mut progress = quant.progress();
            let job = mppq_api::quantize::analyse_model(
                &model,
                &quant.calib,
                setting,
                quant_config.as_deref(),
                output.as_deref(),
                progress.as_mut(),
            )?;
            print_job(&job, quant.verbose, quant.quiet);
        }
        Command::Platforms => {
            for name in mppq_api::platform::platform_names() {
                let p = mppq_api::platform::platform_by_name(&name)?;
                println!(
                    "{name:<12} {} (dispatcher: {}; exporters: {})",
                    p.description(),
                    p.dispatcher(),
                    p.exporters().join(", ")
                );
            }
        }
        Command::Exporters => {
            for name in mppq_api::export::exporter_names() {
                let e = mppq_api::export::exporter_by_name(&name)?;
                let options = e.default_options();
                let options = options.as_object().filter(|o| !o.is_empty()).map(|o| {
                    let list: Vec<String> = o.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    format!(" [export.{name}]: {}", list.join(", "))
                });
                println!("{name:<12} {}{}", e.description(), options.unwrap_or_default());
            }
        }
        Command::Parsers => {
            for name in mppq_api::platform::parser::parser_names() {
                println!("{name:<12} {}", mppq_api::platform::parser::parser_by_name(&name)?.description());
            }
        }
    }
    Ok(())
}

/// What a quantize/analyse run prints: files written, then (unless quiet) the error summary.
fn print_job(job: &mppq_api::quantize::JobSummary, verbose: bool, quiet: bool) {
    // The conversion changes the deployed model's opset and operations.
    if let Some(u) = job.opset_upgrade.as_ref().filter(|_| !quiet) {
        println!("note: model converted from {u}");
        for r in u.rewrites.iter().filter(|_| verbose) {
            println!("  {r}");
        }
    }
    if let Some(cap) = job.opset_cap.as_ref().filter(|_| !quiet) {
        println!("note: {cap}");
    }
    for note in job.data_notes.iter().filter(|_| !quiet) {
        println!("note: calibration data: {note}");
    }
    if verbose {
        if let Some(d) = &job.dispatch {
            print!("{d}");
        }
        for r in &job.pass_reports {
            println!("pass {r}");
        }
    }
    // What the budget gave back is printed even when quiet: it changes the deployed model.
    if let Some(budget) = &job.budget {
        println!("{budget}");
    }
    if !quiet && let Some(report) = &job.analysis {
        print!("{}", mppq_api::report::render_table(report, 100));
    }
    // What was simulated, and (even when quiet) where another CPU would compute otherwise.
    if let Some(a) = job.analysis.as_ref().and_then(|r| r.integer_arithmetic.as_ref()) {
        let summary = a.summary();
        let mut lines = summary.lines();
        if let Some(first) = lines.next().filter(|_| !quiet) {
            println!("note: {first}; this machine: {}", mppq_api::quant::quantizer::TargetCpu::host());
        }
        lines.for_each(|l| println!("{l}"));
    }
    for (what, path) in &job.files {
        println!("{what}: {}", path.display());
    }
    println!("{}", job.summary_line());
}
