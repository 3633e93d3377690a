//! Fuzz targets of mppq. Each takes arbitrary bytes and drives one thing a user feeds in the way
//! the `mppq` CLI does; it returns normally on every input, and a panic, an abort or a hang is a
//! finding. `cargo xtask fuzz TARGET` runs one under libFuzzer (cargo-fuzz, without a sanitizer,
//! so on our pinned stable toolchain: see `docs/fuzzing.md`); `tests/corpus.rs` replays the kept
//! corpus of every target (`testdata/fuzz/TARGET/`) as a regression test.
//!
//! | target | what the bytes are |
//! |---|---|
//! | [`onnx_load`] | an ONNX model in a folder with external data files (and a link out of it): load, the up-front model checks, save |
//! | [`quantize_pipeline`] | an ONNX model: load → dispatch → quantize → export → analysis |
//! | [`calib_readers`] | a calibration file (`.npy`, `.npz`, `.bin`, PNG, JPEG, BMP; first byte picks) |
//! | [`config_readers`] | a setting file (TOML, JSON; checked, then quantizing a small model), a quantization JSON or a range file to import (first byte picks) |
//! | [`caffe_weights`] | a `.caffemodel` for one of the test prototxts (first byte picks): load, checks, quantize |

use mppq_api::data::calib::{Batch, CalibrationSet, DataSetting, InputSignature};
use mppq_api::ir::{DataType, Model, TensorData};
use mppq_api::passes::NoProgress;
use mppq_api::{QuantizeSetting, load_quantizer};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A fuzz target: returns on every input; a panic is a finding.
pub type Target = fn(&[u8]);

/// The targets by name, for the replay test and the xtask.
pub const TARGETS: &[(&str, Target)] = &[
    ("onnx_load", onnx_load),
    ("quantize_pipeline", quantize_pipeline),
    ("calib_readers", calib_readers),
    ("config_readers", config_readers),
    ("caffe_weights", caffe_weights),
];

/// Largest tensor an operator may allocate while fuzzing: a mutated shape must meet the budget
/// check, not the machine's memory.
const MAX_TENSOR_MIB: u64 = 256;

/// Most iterations one Loop may run while fuzzing: a mutated trip count (786,435 in the first
/// timeout found) is a long but legitimate run, not a hang; the limit makes it an error.
const MAX_LOOP_ITERATIONS: u64 = 1000;

/// Largest synthetic input fed to a mutated model (elements).
const MAX_INPUT_ELEMENTS: usize = 1 << 16;

/// Bytes of the file outside the model's folder that the folder links to: no loaded model may
/// contain them (external data must not escape the folder).
const OUTSIDE_SECRET: &[u8] = b"SECRET-OUTSIDE-THE-MODEL-FOLDER!";

/// An ONNX model, written into a folder that holds external data files (`weights.bin`,
/// `sub/weights.bin`) and `link.bin`, a symbolic link to a file outside the folder: loaded from
/// that path, checked as `mppq quantize` checks it up front, described as `mppq info` does, and
/// written back. A model that loads may not carry the outside file's bytes.
#[allow(clippy::panic)] // a panic is how a target tells libFuzzer of a finding
pub fn onnx_load(data: &[u8]) {
    let Some(folder) = external_data_folder() else { return };
    let path = folder.join("model.onnx");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(model) = mppq_api::onnx::load_model(&path) else { return };
    let _ = mppq_api::quantize::check_model(&path, &model);
    let _ = mppq_api::ModelInfo::new(&model);
    if let Ok(bytes) = mppq_api::onnx::model_to_bytes(&model)
        && bytes.windows(OUTSIDE_SECRET.len()).any(|w| w == OUTSIDE_SECRET)
    {
        panic!("a model read external data from outside its folder");
    }
}

/// The folder [`onnx_load`] writes models into, made once: 4 KiB of float data in
/// `weights.bin` and `sub/weights.bin`, and `link.bin` linking to a file outside it.
fn external_data_folder() -> Option<&'static Path> {
    static FOLDER: OnceLock<Option<(tempfile::TempDir, tempfile::TempDir)>> = OnceLock::new();
    let made = FOLDER.get_or_init(|| {
        let (inside, outside) = (scratch()?, scratch()?);
        let floats: Vec<u8> = (0..1024u32).flat_map(|i| (i as f32 / 1024.0).to_le_bytes()).collect();
        std::fs::write(inside.path().join("weights.bin"), &floats).ok()?;
        std::fs::create_dir(inside.path().join("sub")).ok()?;
        std::fs::write(inside.path().join("sub/weights.bin"), &floats).ok()?;
        let secret = outside.path().join("secret.bin");
        std::fs::write(&secret, OUTSIDE_SECRET.repeat(128)).ok()?;
        #[cfg(unix)]
        std::os::unix::fs::symlink(&secret, inside.path().join("link.bin")).ok()?;
        Some((inside, outside))
    });
    made.as_ref().map(|(inside, _)| inside.path())
}

/// An ONNX model through the whole `mppq quantize` run with default settings, on one synthetic
/// batch: load and checks, dispatch, quantization passes, every default exporter, the analysis.
/// What the run exports must load again.
#[allow(clippy::panic)] // a panic is how a target tells libFuzzer of a finding
pub fn quantize_pipeline(data: &[u8]) {
    let Some(dir) = scratch() else { return };
    let model_path = dir.path().join("model.onnx");
    if std::fs::write(&model_path, data).is_err() {
        return;
    }
    let setting = QuantizeSetting {
        max_tensor_mib: Some(MAX_TENSOR_MIB),
        max_loop_iterations: Some(MAX_LOOP_ITERATIONS),
        ..QuantizeSetting::default()
    };
    let Some(mut q) = trace("load", load_quantizer(&model_path, setting)) else { return };
    let Some(batch) = synthetic_batch(&q.model, data) else { return };
    let calib = CalibrationSet::from_batches(&q.model, "fuzz", vec![batch]);
    if trace("quantize", q.quantize(&calib, &mut NoProgress)).is_none() {
        return;
    }
    let out = dir.path().join("out");
    let Some(artifacts) = trace("export", q.export_to(&out)) else { return };
    for artifact in artifacts.iter().filter(|a| a.path.extension().is_some_and(|e| e == "onnx")) {
        if let Err(e) = mppq_api::onnx::load_model(&artifact.path) {
            panic!("our own export {} does not load again: {e}", artifact.path.display());
        }
    }
    trace("analysis", mppq_api::quantize::run_analysis(&q, &calib, &mut NoProgress));
}

/// Extensions [`calib_readers`] picks from with the first byte.
const CALIB_KINDS: &[&str] = &["npy", "npz", "bin", "png", "jpg", "bmp"];

/// A calibration file for `testdata/tiny_cnn.onnx` (input `float[batch, 3, 32, 32]`): the first
/// byte picks the kind (and, for images, the preprocessing); the rest is the file. Read as
/// `mppq quantize --calib` reads it, then turned into feeds.
pub fn calib_readers(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let Some(model) = tiny_cnn() else { return };
    let Some(dir) = scratch() else { return };
    let kind = CALIB_KINDS[usize::from(selector) % CALIB_KINDS.len()];
    if std::fs::write(dir.path().join(format!("batch.{kind}")), bytes).is_err() {
        return;
    }
    let mut setting = DataSetting { cache_mib: 1, ..DataSetting::default() };
    let variant = usize::from(selector) / CALIB_KINDS.len();
    match variant % 4 {
        0 => setting.image.resize = Some("32x32".into()),
        1 => setting.image.letterbox = Some("32x32".into()),
        2 => (setting.image.resize, setting.image.crop) = (Some("36".into()), Some("32".into())),
        _ => {
            setting.input_shape.insert(String::new(), vec![1, 3, 32, 32]);
        }
    }
    if variant / 4 % 2 == 1 {
        setting.image.channels = mppq_api::data::calib::Channels::Bgr;
        setting.image.layout = mppq_api::data::calib::Layout::Nhwc;
    }
    let Ok(set) = CalibrationSet::open(model, dir.path(), &setting, Some(2), &mut NoProgress) else { return };
    let device = mppq_api::exec::Device::cpu();
    for i in 0..set.len() {
        let _ = set.feeds(i, &device);
    }
}

/// A setting file (`.toml` or `.json`) checked as `mppq quantize --setting` checks it before
/// any work and then used to quantize a small model on one batch (so every knob reaches the pass
/// that reads it, with the default observer too); a quantization JSON applied to
/// `testdata/tiny_cnn.onnx` and simulated on one batch as `mppq run --quant-config` does; or a
/// range file imported while quantizing `tiny_cnn` (`--import-ranges`). The first byte picks:
/// below 192 one of the first three (as before range files were added), from 192 a range file.
pub fn config_readers(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let (Some(model), Some(model_path)) = (tiny_cnn(), tiny_cnn_path()) else { return };
    let Some(dir) = scratch() else { return };
    let name = if selector >= 192 {
        "ranges"
    } else {
        ["setting.toml", "setting.json", "quant.json"][usize::from(selector) % 3]
    };
    let path = dir.path().join(name);
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    let bounded = || QuantizeSetting {
        max_tensor_mib: Some(MAX_TENSOR_MIB),
        max_loop_iterations: Some(MAX_LOOP_ITERATIONS),
        ..QuantizeSetting::default()
    };
    match name {
        "quant.json" => {
            let Ok(mut q) = load_quantizer(model_path, bounded()) else { return };
            if mppq_api::quantize::apply_quant_config(&mut q.model, &path, &q.setting.pipeline).is_err() {
                return;
            }
            let Some(batch) = synthetic_batch(model, bytes) else { return };
            let device = mppq_api::exec::Device::cpu();
            let calib = CalibrationSet::from_batches(model, "fuzz", vec![batch]);
            let Ok(feeds) = calib.feeds(0, &device) else { return };
            let _ = q.simulate(feeds);
        }
        "ranges" => {
            let setting = QuantizeSetting { import_ranges: Some(path.clone()), ..bounded() };
            let Ok(mut q) = load_quantizer(model_path, setting) else { return };
            let Some(batch) = synthetic_batch(model, bytes) else { return };
            let calib = CalibrationSet::from_batches(model, "fuzz", vec![batch]);
            let _ = q.quantize(&calib, &mut NoProgress);
        }
        _ => {
            let Ok(mut setting) = QuantizeSetting::from_file(&path) else { return };
            // The budgets are process-wide: a fuzzed one would change every later input's run.
            setting.max_tensor_mib = Some(MAX_TENSOR_MIB);
            setting.max_loop_iterations = Some(MAX_LOOP_ITERATIONS);
            // Settings name files and exporters: those are other targets' business.
            (setting.import_ranges, setting.weights, setting.exporters) = (None, None, Some(vec!["quant-json".into()]));
            let Some(mini) = mini_model_path() else { return };
            let Ok(mut q) = load_quantizer(mini, setting) else { return };
            bound_the_work(&mut q.setting);
            let Some(batch) = synthetic_batch(&q.model, bytes) else { return };
            let calib = CalibrationSet::from_batches(&q.model, "fuzz", vec![batch]);
            let _ = q.quantize(&calib, &mut NoProgress);
        }
    }
}

/// Caps the knobs that only make a valid setting slow (training steps, rounds, batches), once it
/// has been checked: a long run is not a finding, a panic on the knob's value is.
fn bound_the_work(setting: &mut QuantizeSetting) {
    let p = &mut setting.pipeline;
    for s in [&mut p.adaround, &mut p.round_tuning, &mut p.block_reconstruction, &mut p.lsq] {
        (s.steps, s.batches, s.patience) = (s.steps.min(3), s.batches.min(1), s.patience.min(3));
    }
    p.bias_correction.rounds = p.bias_correction.rounds.min(1);
    p.equalization.iterations = p.equalization.iterations.min(2);
    p.ssd_equalization.iterations = p.ssd_equalization.iterations.min(1);
    p.channel_split.rounds = p.channel_split.rounds.min(1);
    setting.budget.max_float_ops = setting.budget.max_float_ops.map(|n| n.min(2));
}

/// A `.caffemodel` (the bytes after the first) for one of the test prototxts (the first byte
/// picks): loaded as `mppq quantize NET.prototxt --weights W` loads it (weights checked against
/// the prototxt), then quantized on one synthetic batch.
pub fn caffe_weights(data: &[u8]) {
    const NETS: &[(&str, &str)] = &[
        ("activations", include_str!("../../../testdata/caffe/activations.prototxt")),
        ("batchnorm_scale", include_str!("../../../testdata/caffe/batchnorm_scale.prototxt")),
        ("conv_inplace", include_str!("../../../testdata/caffe/conv_inplace.prototxt")),
        ("deconv", include_str!("../../../testdata/caffe/deconv.prototxt")),
        ("eltwise_concat", include_str!("../../../testdata/caffe/eltwise_concat.prototxt")),
        ("legacy_input", include_str!("../../../testdata/caffe/legacy_input.prototxt")),
        ("lrn", include_str!("../../../testdata/caffe/lrn.prototxt")),
        ("pooling", include_str!("../../../testdata/caffe/pooling.prototxt")),
        ("shapes", include_str!("../../../testdata/caffe/shapes.prototxt")),
    ];
    let Some((&selector, weights)) = data.split_first() else { return };
    let (name, prototxt) = NETS[usize::from(selector) % NETS.len()];
    let loaded = mppq_api::onnx::caffe::load_caffe_from_bytes(prototxt, weights, name, "fuzz.caffemodel");
    let Some(model) = trace("load", loaded.map_err(mppq_api::ApiError::from)) else { return };
    if mppq_api::quantize::check_model(Path::new(name), &model).is_err() {
        return;
    }
    let Ok(platform) = mppq_api::platform_by_name("default") else { return };
    let setting = QuantizeSetting {
        max_tensor_mib: Some(MAX_TENSOR_MIB),
        max_loop_iterations: Some(MAX_LOOP_ITERATIONS),
        exporters: Some(vec!["quant-json".into()]),
        ..QuantizeSetting::default()
    };
    let Some(mut q) = trace("quantizer", mppq_api::ModelQuantizer::new(platform, model, setting)) else { return };
    let Some(batch) = synthetic_batch(&q.model, data) else { return };
    let calib = CalibrationSet::from_batches(&q.model, "fuzz", vec![batch]);
    trace("quantize", q.quantize(&calib, &mut NoProgress));
}

/// The result's value; with `MPPQ_FUZZ_TRACE` set, the error of a failed `stage` is printed, to
/// see how deep a corpus reaches.
fn trace<T>(stage: &str, result: mppq_api::Result<T>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            if std::env::var_os("MPPQ_FUZZ_TRACE").is_some() {
                eprintln!("{stage}: {e}");
            }
            None
        }
    }
}

/// A fresh scratch directory (under `TMPDIR`); `None` when none can be made.
fn scratch() -> Option<tempfile::TempDir> {
    tempfile::Builder::new().prefix("mppq-fuzz-").tempdir().ok()
}

const TINY_CNN: &[u8] = include_bytes!("../../../testdata/tiny_cnn.onnx");

fn tiny_cnn() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL.get_or_init(|| mppq_api::onnx::load_model_from_bytes(TINY_CNN, None, "tiny_cnn.onnx").ok()).as_ref()
}

/// `testdata/tiny_cnn.onnx` as a file, for the API that reads a model from a path.
fn tiny_cnn_path() -> Option<&'static Path> {
    static FILE: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    let made = FILE.get_or_init(|| {
        let dir = scratch()?;
        let path = dir.path().join("tiny_cnn.onnx");
        std::fs::write(&path, TINY_CNN).ok()?;
        Some((dir, path))
    });
    made.as_ref().map(|(_, path)| path.as_path())
}

/// A small model for [`config_readers`]' settings to quantize quickly (two Conv + ReLU, an
/// InnerProduct and a Softmax on a 2×4×11×11 input): `testdata/caffe/conv_inplace` converted,
/// written once.
fn mini_model_path() -> Option<&'static Path> {
    static FILE: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    let made = FILE.get_or_init(|| {
        let model = mppq_api::onnx::caffe::load_caffe_from_bytes(
            include_str!("../../../testdata/caffe/conv_inplace.prototxt"),
            include_bytes!("../../../testdata/caffe/conv_inplace.caffemodel"),
            "conv_inplace.prototxt",
            "conv_inplace.caffemodel",
        )
        .ok()?;
        let dir = scratch()?;
        let path = dir.path().join("mini.onnx");
        mppq_api::onnx::save_model(&model, &path, &Default::default()).ok()?;
        Some((dir, path))
    });
    made.as_ref().map(|(_, path)| path.as_path())
}

/// One batch for `model`: every input at its declared shape (dynamic dims = 1), float values
/// in [-1, 1) and integers in {0, 1} drawn from a seed of `data`. `None` for an input type we
/// do not synthesise or an input over [`MAX_INPUT_ELEMENTS`].
fn synthetic_batch(model: &Model, data: &[u8]) -> Option<Batch> {
    let mut state =
        data.iter().fold(0x9e37_79b9_7f4a_7c15_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut batch = Batch::new();
    for input in InputSignature::of(model).inputs {
        let shape: Vec<usize> = input.dims().unwrap_or_default().into_iter().map(|d| d.unwrap_or(1)).collect();
        let count = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d)).filter(|n| *n <= MAX_INPUT_ELEMENTS)?;
        let dtype = input.dtype().unwrap_or(DataType::Float);
        let tensor = if dtype.is_float() {
            let values: Vec<f32> = (0..count).map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0).collect();
            TensorData::from_f32_as(dtype, shape, &values).ok()?
        } else {
            let bits: Vec<i64> = (0..count).map(|_| (next() & 1) as i64).collect();
            match dtype {
                DataType::Int64 => TensorData::from_vec(shape, &bits).ok()?,
                DataType::Int32 => {
                    TensorData::from_vec(shape, &bits.iter().map(|b| *b as i32).collect::<Vec<_>>()).ok()?
                }
                DataType::Int8 => {
                    TensorData::from_vec(shape, &bits.iter().map(|b| *b as i8).collect::<Vec<_>>()).ok()?
                }
                DataType::Uint8 => {
                    TensorData::from_vec(shape, &bits.iter().map(|b| *b as u8).collect::<Vec<_>>()).ok()?
                }
                DataType::Bool => {
                    TensorData::from_vec(shape, &bits.iter().map(|b| *b == 1).collect::<Vec<_>>()).ok()?
                }
                _ => return None,
            }
        };
        batch.push((input.name, tensor));
    }
    Some(batch)
}
