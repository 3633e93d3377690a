//! Calibration data: what a directory (or one file) holds, turned into batches of input tensors.
//! A batch is one `.npy` (single-input models) or `.npz` (keys = input names) file, one raw
//! `.bin` file ([`raw`]), or `batch` images of a folder ([`image`]: decoded and preprocessed as
//! Pillow/torchvision would). Files are found recursively (hidden ones skipped) and sorted by
//! path; one kind per set.
//!
//! Everything is checked before any pass runs: each batch is read once, up front, against the
//! model's declared inputs (names, dtypes, shapes) and for NaN/Inf, and every bad file is named
//! in one error. Memory stays bounded: the first batches, up to `cache_mib`, stay in memory; the
//! others are read again from disk when a pass asks for them, so 1,000 batches cost what the
//! cache holds, not 1,000 batches.

mod image;
mod memory;
mod raw;
mod resample;
pub mod signature;

pub use image::{Channels, ImagePipeline, ImageSpec, Layout};
pub use memory::MemoryBatches;
pub use resample::{Interpolation, Pixels};
pub use signature::InputSignature;

use crate::error::{ApiError, Result};
use image::IMAGE_EXTENSIONS;
use mppq_exec::{Device, Tensor, Value};
use mppq_ir::{Model, TensorData};
use mppq_passes::ProgressSink;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The input tensors of one batch, by input name.
pub type Batch = Vec<(String, TensorData)>;

/// How calibration files become input tensors. Settings file: `[data]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataSetting {
    /// Images per batch (image folders; every other file is one batch). Default: the input's
    /// fixed batch size, else 1. The last batch may be partial: it is kept when the batch
    /// dimension is dynamic and dropped (and said) when it is fixed.
    pub batch: Option<usize>,
    /// Shapes of raw `.bin` inputs by input name (`""`: the only input), needed when the model
    /// does not declare them.
    pub input_shape: BTreeMap<String, Vec<usize>>,
    /// MiB of batches kept in memory after the up-front read; the rest is read again when used.
    pub cache_mib: usize,
    /// Preprocessing of image folders.
    pub image: ImageSpec,
}

impl Default for DataSetting {
    fn default() -> Self {
        Self { batch: None, input_shape: BTreeMap::new(), cache_mib: 1024, image: ImageSpec::default() }
    }
}

/// Where one batch comes from.
#[derive(Clone, Debug)]
enum Source {
    /// A `.npy` or `.npz` file.
    Arrays(PathBuf),
    /// A raw `.bin` file and its shape.
    Raw(PathBuf, Vec<usize>),
    /// Images stacked along a new first axis.
    Images(Vec<PathBuf>),
    /// Given in memory (always cached).
    Memory(String),
    /// Given in memory past the cache: one `.npy` file per input in the set's temporary folder.
    Spilled(String, Vec<(String, PathBuf)>),
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Self::Arrays(p) | Self::Raw(p, _) => p.display().to_string(),
            Self::Images(files) => match files.as_slice() {
                [one] => one.display().to_string(),
                [first, .., last] => format!("{} … {} ({} images)", first.display(), last.display(), files.len()),
                [] => "(no images)".into(),
            },
            Self::Memory(label) | Self::Spilled(label, _) => label.clone(),
        }
    }
}

/// The batches of a calibration set, in path order.
#[derive(Clone, Debug)]
pub struct CalibrationSet {
    sources: Vec<Source>,
    cached: Vec<Option<Batch>>,
    signature: InputSignature,
    images: Option<ImagePipeline>,
    notes: Vec<String>,
    /// The temporary folder of [`Source::Spilled`] batches, removed with the last clone.
    spill: Option<std::sync::Arc<tempfile::TempDir>>,
}

/// What a directory holds, by kind.
#[derive(Default)]
struct Found {
    arrays: Vec<PathBuf>,
    raw: Vec<PathBuf>,
    images: Vec<PathBuf>,
    other: Vec<PathBuf>,
    /// Real paths already read: a directory or file reached twice through links is read once.
    seen: std::collections::HashSet<PathBuf>,
    /// Links skipped because they lead to something already read (said, never silent).
    skipped_links: Vec<String>,
}

impl Found {
    fn scan(path: &Path) -> Result<Self> {
        let mut found = Self::default();
        if path.is_file() {
            found.add(path.to_path_buf());
        } else {
            found.first_visit(path);
            found.walk(path)?;
        }
        for list in [&mut found.arrays, &mut found.raw, &mut found.images] {
            list.sort();
        }
        Ok(found)
    }

    fn walk(&mut self, dir: &Path) -> Result<()> {
        let io = |source| ApiError::Io { path: dir.display().to_string(), source };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(io)?;
        entries.sort();
        for path in entries {
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
                continue;
            }
            // Links are followed (datasets are often linked in), each real directory and file
            // once: a link back to a parent looped forever, a link to a sibling read it twice.
            if (path.is_dir() || path.is_file()) && !self.first_visit(&path) {
                self.skipped_links.push(path.display().to_string());
                continue;
            }
            if path.is_dir() {
                self.walk(&path)?;
            } else if path.is_file() {
                self.add(path);
            }
        }
        Ok(())
    }

    /// Records `path`'s real path; `false` when it was already read.
    fn first_visit(&mut self, path: &Path) -> bool {
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        self.seen.insert(real)
    }

    fn add(&mut self, path: PathBuf) {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
        match ext.as_str() {
            "npy" | "npz" => self.arrays.push(path),
            "bin" => self.raw.push(path),
            e if IMAGE_EXTENSIONS.contains(&e) => self.images.push(path),
            _ => self.other.push(path),
        }
    }
}

/// Refuses data options that name nothing here (they used to be ignored without a word): an
/// `input_shape` for an input the model does not have, or for data that are not raw `.bin`
/// files; image options or `batch` for data that are not images.
fn check_options_apply(setting: &DataSetting, signature: &InputSignature, found: &Found, path: &Path) -> Result<()> {
    let names: Vec<&str> = signature.inputs.iter().map(|i| i.name.as_str()).collect();
    if let Some(unknown) = setting.input_shape.keys().find(|k| !k.is_empty() && !names.contains(&k.as_str())) {
        return Err(ApiError::Setting(format!(
            "data.input_shape / --input-shape names `{unknown}`, which is no input of the model (inputs: {})",
            names.join(", ")
        )));
    }
    let kind = if !found.arrays.is_empty() {
        "`.npy`/`.npz` files"
    } else if !found.raw.is_empty() {
        "raw `.bin` files"
    } else {
        "images"
    };
    if !setting.input_shape.is_empty() && found.raw.is_empty() {
        return Err(ApiError::data(
            path,
            format!(
                "data.input_shape / --input-shape applies to raw `.bin` files; the data here are {kind}: leave it out"
            ),
        ));
    }
    if found.images.is_empty() {
        if setting.image != ImageSpec::default() {
            return Err(ApiError::data(
                path,
                format!(
                    "image options (resize, crop, mean, …) apply to image folders; the data here are {kind}: leave them out"
                ),
            ));
        }
        if setting.batch.is_some() {
            return Err(ApiError::data(
                path,
                format!(
                    "data.batch / --batch applies to image folders (each other file is one batch); the data here are {kind}"
                ),
            ));
        }
    }
    Ok(())
}

impl CalibrationSet {
    /// Reads the calibration data at `path` with the default [`DataSetting`] (no progress).
    pub fn from_path(model: &Model, path: &Path, limit: Option<usize>) -> Result<Self> {
        Self::open(model, path, &DataSetting::default(), limit, &mut mppq_passes::NoProgress)
    }

    /// Finds the batches at `path` (a directory, searched recursively, or one file), checks
    /// each one up front and keeps the first ones in memory (see the module doc). At most
    /// `limit` batches when given. An empty set is an error.
    pub fn open(
        model: &Model,
        path: &Path,
        setting: &DataSetting,
        limit: Option<usize>,
        progress: &mut dyn ProgressSink,
    ) -> Result<Self> {
        let signature = InputSignature::of(model);
        let found = Found::scan(path)?;
        let kinds =
            [("`.npy`/`.npz`", found.arrays.len()), ("raw `.bin`", found.raw.len()), ("image", found.images.len())];
        let present: Vec<String> =
            kinds.iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{n} {k} files")).collect();
        if present.len() > 1 {
            return Err(ApiError::data(
                path,
                format!("calibration data mixes {}: keep one kind per directory", present.join(" and ")),
            ));
        }
        check_options_apply(setting, &signature, &found, path)?;
        let mut set = Self::empty(signature);
        if let Some(first) = found.skipped_links.first() {
            set.notes.push(format!(
                "{} link(s) lead to data already read and were skipped (e.g. `{first}`)",
                found.skipped_links.len()
            ));
        }
        if !found.arrays.is_empty() {
            set.sources = found.arrays.into_iter().map(Source::Arrays).collect();
        } else if !found.raw.is_empty() {
            set.sources = set.raw_sources(found.raw, setting)?;
        } else if !found.images.is_empty() {
            set.sources = set.image_sources(found.images, setting, path)?;
        } else {
            let seen = match found.other.first() {
                Some(p) => format!("; found {} other file(s), e.g. {}", found.other.len(), p.display()),
                None => String::new(),
            };
            return Err(ApiError::data(
                path,
                format!(
                    "no calibration data: expected .npy (single-input models) or .npz batches (keys = input names), raw .bin files or images ({}){seen}",
                    IMAGE_EXTENSIONS.join(", ")
                ),
            ));
        }
        if let Some(limit) = limit {
            set.sources.truncate(limit.max(1));
        }
        set.read_up_front(setting.cache_mib.saturating_mul(1 << 20), progress)?;
        Ok(set)
    }

    /// A set of batches already in memory; `label` names them in errors.
    pub fn from_batches(model: &Model, label: &str, batches: Vec<Batch>) -> Self {
        let mut set = Self::empty(InputSignature::of(model));
        set.sources = (0..batches.len()).map(|i| Source::Memory(format!("<{label}, calibration batch {i}>"))).collect();
        set.cached = batches.into_iter().map(Some).collect();
        set
    }

    /// A set without batches for inputs `signature`.
    fn empty(signature: InputSignature) -> Self {
        Self { sources: Vec::new(), cached: Vec::new(), signature, images: None, notes: Vec::new(), spill: None }
    }

    fn raw_sources(&self, files: Vec<PathBuf>, setting: &DataSetting) -> Result<Vec<Source>> {
        let first = files.first().cloned().unwrap_or_default();
        let input = self.signature.single(&first, "a raw .bin file")?;
        let given = setting.input_shape.get(&input.name).or_else(|| setting.input_shape.get(""));
        let mut errors = Errors::default();
        let mut sources = Vec::new();
        for file in files {
            let len = std::fs::metadata(&file).map(|m| m.len());
            match len
                .map_err(|source| ApiError::Io { path: file.display().to_string(), source })
                .and_then(|len| raw::shape_of(input, given.map(Vec::as_slice), len, &file))
            {
                Ok(shape) => sources.push(Source::Raw(file, shape)),
                Err(e) => errors.push(e),
            }
        }
        errors.into_result(&first)?;
        Ok(sources)
    }

    fn image_sources(&mut self, files: Vec<PathBuf>, setting: &DataSetting, dir: &Path) -> Result<Vec<Source>> {
        let input = self.signature.single(dir, "an image folder")?.clone();
        let dtype = input.dtype().unwrap_or(mppq_ir::DataType::Float);
        let pipeline = ImagePipeline::new(&setting.image, dtype)?;
        let dims = input.dims();
        if let Some(dims) = &dims
            && dims.len() != 4
        {
            return Err(ApiError::data(
                dir,
                format!("input `{}` has rank {}: images feed a rank-4 input (NCHW or NHWC)", input.name, dims.len()),
            ));
        }
        let fixed_batch = dims.as_ref().and_then(|d| d[0]);
        let batch = match (setting.batch, fixed_batch) {
            (Some(b), Some(f)) if b != f => {
                return Err(ApiError::Setting(format!(
                    "batch {b}: input `{}` has a fixed batch size of {f}; use --batch {f} or leave it out",
                    input.name
                )));
            }
            (Some(0), _) => return Err(ApiError::Setting("batch must be at least 1".into())),
            (Some(b), _) => b,
            (None, f) => f.unwrap_or(1),
        };
        // Headers only: every image's size after preprocessing, against the declared shape.
        let (c, layout) = (pipeline.channels(), pipeline.layout());
        let declared_hw = dims.as_ref().map(|d| match layout {
            Layout::Nchw => (d[3], d[2], d[1]),
            Layout::Nhwc => (d[2], d[1], d[3]),
        });
        if let Some((_, _, Some(dc))) = declared_hw
            && dc != c
        {
            let hint = if layout == Layout::Nchw && dims.as_ref().and_then(|d| d[3]) == Some(c) {
                " (the input looks NHWC: --layout nhwc)"
            } else {
                ""
            };
            return Err(ApiError::data(
                dir,
                format!("input `{}` takes {dc} channel(s), the images give {c} ({layout:?}){hint}", input.name),
            ));
        }
        let sizes: Vec<Result<(usize, usize)>> = files
            .par_iter()
            .map(|f| {
                let (w, h) = image::dimensions(f)?;
                let (ow, oh) = pipeline.output_size(w, h).map_err(|m| ApiError::data(f, m))?;
                if let Some((dw, dh, _)) = declared_hw
                    && (dw.is_some_and(|dw| dw != ow) || dh.is_some_and(|dh| dh != oh))
                {
                    return Err(ApiError::data(
                        f,
                        format!(
                            "a {w}x{h} image becomes {ow}x{oh}, input `{}` takes {}x{}: set resize, crop or letterbox (e.g. --resize {}x{})",
                            input.name,
                            dw.map_or("any".into(), |v| v.to_string()),
                            dh.map_or("any".into(), |v| v.to_string()),
                            dw.unwrap_or(ow),
                            dh.unwrap_or(oh),
                        ),
                    ));
                }
                Ok((ow, oh))
            })
            .collect();
        let mut errors = Errors::default();
        let mut ok = Vec::with_capacity(files.len());
        for r in sizes {
            match r {
                Ok(s) => ok.push(s),
                Err(e) => errors.push(e),
            }
        }
        errors.into_result(dir)?;
        let mut sources = Vec::new();
        for (chunk, sizes) in files.chunks(batch).zip(ok.chunks(batch)) {
            if let Some(i) = sizes.iter().position(|s| *s != sizes[0]) {
                return Err(ApiError::data(
                    &chunk[i],
                    format!(
                        "becomes {}x{} but {} of the same batch becomes {}x{}: images of a batch must share a size (resize or crop them)",
                        sizes[i].0,
                        sizes[i].1,
                        chunk[0].display(),
                        sizes[0].0,
                        sizes[0].1
                    ),
                ));
            }
            if chunk.len() < batch && fixed_batch.is_some() {
                self.notes.push(format!(
                    "the last {} image(s) are left out: input `{}` takes batches of exactly {batch}",
                    chunk.len(),
                    input.name
                ));
                break;
            }
            if chunk.len() < batch {
                self.notes.push(format!("the last batch holds {} image(s), the others {batch}", chunk.len()));
            }
            sources.push(Source::Images(chunk.to_vec()));
        }
        if sources.is_empty() {
            return Err(ApiError::data(
                dir,
                format!("{} image(s) make no full batch of {batch} for input `{}`", files.len(), input.name),
            ));
        }
        self.images = Some(pipeline);
        Ok(sources)
    }

    /// Reads every batch once (checking it), keeping the first `budget` bytes of them.
    fn read_up_front(&mut self, budget: usize, progress: &mut dyn ProgressSink) -> Result<()> {
        let n = self.sources.len();
        let slow = n > 16 || matches!(self.sources.first(), Some(Source::Images(_)));
        if slow {
            progress.begin("reading calibration data", n as u64);
        }
        let mut errors = Errors::default();
        let (mut kept, mut full) = (0usize, false);
        self.cached = vec![None; n];
        let chunk = rayon::current_num_threads().max(1);
        for start in (0..n).step_by(chunk) {
            let end = (start + chunk).min(n);
            let read: Vec<Result<Batch>> = (start..end).into_par_iter().map(|i| self.read(i)).collect();
            for (i, batch) in (start..end).zip(read) {
                match batch {
                    Ok(b) => {
                        let bytes: usize = b.iter().map(|(_, t)| t.byte_len()).sum();
                        if !full && kept + bytes <= budget {
                            kept += bytes;
                            self.cached[i] = Some(b);
                        } else {
                            full = true;
                        }
                    }
                    Err(e) => errors.push(e),
                }
            }
            if slow {
                progress.advance((end - start) as u64);
            }
        }
        if slow {
            progress.finish();
        }
        let cached = self.cached.iter().filter(|c| c.is_some()).count();
        if cached < n {
            self.notes.push(format!(
                "{cached} of {n} batches kept in memory ({} MiB); the others are read again when used",
                kept >> 20
            ));
        }
        errors.into_result(Path::new("calibration data"))
    }

    /// Reads and checks batch `index` from its source.
    fn read(&self, index: usize) -> Result<Batch> {
        let batch = match &self.sources[index] {
            Source::Arrays(path) => self.signature.read_arrays(path)?,
            Source::Raw(path, shape) => {
                let input = self.signature.single(path, "a raw .bin file")?;
                let data = raw::read(input, shape.clone(), path)?;
                signature::check(input, path, &data)?;
                vec![(input.name.clone(), data)]
            }
            Source::Images(files) => {
                let (Some(pipeline), Some(first)) = (&self.images, files.first()) else {
                    return Err(ApiError::Setting("image batch without an image pipeline".into()));
                };
                let input = self.signature.single(first, "an image folder")?;
                let images: Vec<TensorData> = files.par_iter().map(|f| pipeline.load(f)).collect::<Result<_>>()?;
                let data = stack(&images).map_err(|e| ApiError::data(first, e.to_string()))?;
                signature::check(input, first, &data)?;
                vec![(input.name.clone(), data)]
            }
            Source::Memory(label) => {
                return Err(ApiError::Setting(format!("{label}: an in-memory batch is not in memory")));
            }
            // Checked when it was pushed; the files are this set's own.
            Source::Spilled(_, files) => {
                return files
                    .iter()
                    .map(|(name, file)| Ok((name.clone(), crate::data::npy::read_npy(file)?)))
                    .collect();
            }
        };
        let file = PathBuf::from(self.sources[index].describe());
        for (name, data) in &batch {
            check_finite(&file, name, data)?;
        }
        Ok(batch)
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Where batch `index` comes from (its file, or its first and last image).
    pub fn describe(&self, index: usize) -> String {
        self.sources.get(index).map(Source::describe).unwrap_or_default()
    }

    /// What the reading decided that the user should know (a dropped partial batch, batches
    /// read again from disk), one line each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Batch `index` as IR tensors: from memory, or read again.
    pub fn batch(&self, index: usize) -> Result<std::borrow::Cow<'_, Batch>> {
        match self.cached.get(index) {
            Some(Some(b)) => Ok(std::borrow::Cow::Borrowed(b)),
            Some(None) => self.read(index).map(std::borrow::Cow::Owned),
            None => Err(ApiError::Setting(format!("no calibration batch {index} (there are {})", self.len()))),
        }
    }

    /// The first `count` batches (all when `None`; at least one) as executor feeds.
    pub fn first_values(&self, count: Option<usize>, device: &Device) -> Result<Vec<Vec<(String, Value)>>> {
        let n = count.unwrap_or(self.len()).clamp(1, self.len().max(1)).min(self.len());
        (0..n).map(|i| self.feeds(i, device)).collect()
    }

    /// Batch `index` as executor feeds on `device`.
    pub fn feeds(&self, index: usize, device: &Device) -> Result<Vec<(String, Value)>> {
        let batch = self.batch(index)?;
        batch
            .iter()
            .map(|(name, data)| {
                Tensor::from_data(data, device)
                    .map(|t| (name.clone(), Value::Tensor(t)))
                    .map_err(|e| ApiError::data(self.describe(index), format!("input `{name}`: {e}")))
            })
            .collect()
    }
}

/// Stacks same-shaped tensors along a new first axis.
fn stack(images: &[TensorData]) -> mppq_ir::Result<TensorData> {
    let Some(first) = images.first() else { return TensorData::from_vec::<f32>(vec![0], &[]) };
    let mut bytes = Vec::with_capacity(first.byte_len() * images.len());
    for image in images {
        bytes.extend_from_slice(image.packed().unwrap_or_default());
    }
    let mut shape = vec![images.len()];
    shape.extend_from_slice(first.shape());
    TensorData::from_packed(first.dtype(), shape, bytes)
}

/// Errors of many files, reported together (the first 20, then a count).
#[derive(Default)]
struct Errors(Vec<ApiError>);

impl Errors {
    fn push(&mut self, e: ApiError) {
        self.0.push(e);
    }

    fn into_result(self, what: &Path) -> Result<()> {
        let mut errors = self.0;
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            n => {
                let mut lines: Vec<String> = errors.iter().take(20).map(|e| format!("  {e}")).collect();
                if n > 20 {
                    lines.push(format!("  … and {} more", n - 20));
                }
                Err(ApiError::data(what, format!("{n} files cannot be used:\n{}", lines.join("\n"))))
            }
        }
    }
}

/// Float inputs must hold finite numbers: observers would otherwise produce NaN scales.
fn check_finite(file: &Path, name: &str, data: &TensorData) -> Result<()> {
    if !data.dtype().is_float() {
        return Ok(());
    }
    let values = data.to_f32_vec().map_err(|e| ApiError::data(file, format!("input `{name}`: {e}")))?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(ApiError::data(
            file,
            format!("input `{name}` holds {} at flat index {i}: calibration data must be finite", values[i]),
        ));
    }
    Ok(())
}

/// The set as a stream for the passes: each batch becomes device tensors only when asked for.
impl mppq_quant::CalibrationData for CalibrationSet {
    fn batch_count(&self) -> usize {
        self.len()
    }
    fn batch(&self, index: usize, device: &Device) -> std::result::Result<mppq_quant::Feeds, String> {
        self.feeds(index, device).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
    }

    #[test]
    fn reads_sorted_batches_and_limits() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let set = CalibrationSet::from_path(&model, &testdata().join("tiny_cnn_calib"), Some(3)).unwrap();
        assert_eq!(set.len(), 3);
        assert!(set.describe(0).ends_with("batch_000.npz") && set.describe(2).ends_with("batch_002.npz"));
        let all = CalibrationSet::from_path(&model, &testdata().join("tiny_cnn_calib"), None).unwrap();
        assert_eq!(all.len(), 8);
    }

    #[test]
    fn npy_batches_feed_a_single_input_model() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2 {
            let values: Vec<f32> = (0..2 * 3 * 32 * 32).map(|k| ((k + i) % 7) as f32 * 0.1).collect();
            let data = TensorData::from_vec(vec![2, 3, 32, 32], &values).unwrap();
            crate::data::npy::write_npy(&dir.path().join(format!("b{i}.npy")), &data).unwrap();
        }
        let set = CalibrationSet::from_path(&model, dir.path(), None).unwrap();
        assert_eq!(set.len(), 2);
        let batch = set.batch(1).unwrap();
        let (name, data) = &batch[0];
        assert_eq!(name, model.graph.var_name(model.graph.feed_inputs()[0]));
        assert_eq!(data.shape(), &[2, 3, 32, 32]);
        assert_eq!(data.to_f32_vec().unwrap()[0], 0.1);
        // A wrong shape names the file and the input.
        let bad = TensorData::from_vec(vec![1, 3, 16, 16], &vec![0f32; 768]).unwrap();
        crate::data::npy::write_npy(&dir.path().join("c.npy"), &bad).unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("c.npy") && err.contains("shape"), "{err}");
    }

    #[test]
    fn empty_dir_and_nan_are_errors_naming_the_file() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("no calibration data"), "{err}");

        let input = model.graph.var_name(model.graph.feed_inputs()[0]).to_string();
        let mut values = vec![0.5f32; 3 * 32 * 32];
        values[7] = f32::NAN;
        let data = TensorData::from_vec(vec![1, 3, 32, 32], &values).unwrap();
        let path = dir.path().join("b0.npy");
        crate::data::npy::write_npy(&path, &data).unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("b0.npy") && err.contains(&input) && err.contains("NaN"), "{err}");
    }
}
