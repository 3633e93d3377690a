//! A model being quantized ([`Session`]: the model read, the setting resolved, calibration
//! batches fed one by one or a folder named) and the result ([`Quantized`]: the files the
//! exporters and the report wrote, in a private temporary folder until saved, and the quantized
//! graph for the simulation and further exports). The same job as `mppq quantize`
//! ([`mppq_api::quantize::quantize_into`]), so the files are the CLI's byte for byte.

use crate::arrays::{ArrayIn, ArrayOut, batch_from_py, batch_to_py};
use crate::errors::{OrRaise, guard, setting_error, to_py};
use crate::progress::PythonProgress;
use mppq_api::data::calib::{CalibrationSet, InputSignature, MemoryBatches};
use mppq_api::model::run::{to_data, to_values};
use mppq_api::quantize::{JobSummary, ModelQuantizer, quantize_into};
use mppq_api::{ApiError, QuantizeSetting};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};

/// Reads the setting file (or the defaults) and lays the JSON `patch` over it.
pub fn resolve_setting(file: Option<&Path>, patch: &str) -> PyResult<QuantizeSetting> {
    let base = match file {
        Some(path) => QuantizeSetting::from_file(path).or_raise()?,
        None => QuantizeSetting::default(),
    };
    let patch: serde_json::Value =
        serde_json::from_str(patch).map_err(|e| setting_error(format!("setting is not JSON: {e}")))?;
    base.with_patch(&patch).or_raise()
}

/// Where the calibration batches come from.
enum Calibration {
    None,
    Memory(MemoryBatches),
    Set(CalibrationSet),
}

/// A model read for quantization, with its setting; calibration batches are added, then
/// [`Session::quantize`] runs the job once.
#[pyclass(module = "mppq_rs._native", unsendable)]
pub struct Session {
    quantizer: Option<ModelQuantizer>,
    calibration: Calibration,
    /// The files the job reads (never overwritten by `save`).
    inputs: Vec<PathBuf>,
    /// Freed memory kept for the next pass from the model's loading to the job's end, as the
    /// `mppq` program keeps it for its whole run (`mppq_exec::allocator`).
    memory: Option<mppq_api::exec::allocator::RetainedForJob>,
}

#[pymethods]
impl Session {
    /// `model`: a path (any registered format) or the bytes of an ONNX model (`label` names it
    /// in errors). `setting_file`: a TOML/JSON setting file; `patch`: JSON laid over it.
    #[new]
    #[pyo3(signature = (model_path, model_bytes, label, setting_file, patch))]
    fn new(
        py: Python<'_>,
        model_path: Option<PathBuf>,
        model_bytes: Option<Vec<u8>>,
        label: String,
        setting_file: Option<PathBuf>,
        patch: &str,
    ) -> PyResult<Self> {
        let memory = Some(mppq_api::exec::allocator::retain_freed_memory_for_job());
        let setting = resolve_setting(setting_file.as_deref(), patch)?;
        let mut inputs: Vec<PathBuf> = setting.weights.iter().chain(&setting.import_ranges).cloned().collect();
        let quantizer = guard(|| {
            py.detach(|| match (&model_path, model_bytes) {
                (Some(path), _) => mppq_api::load_quantizer(path, setting),
                (None, Some(bytes)) => mppq_api::onnx::load_model_from_bytes(&bytes, None, &label)
                    .map_err(ApiError::from)
                    .and_then(|model| mppq_api::quantize::quantizer_for_model(Path::new(&label), model, setting)),
                (None, None) => Err(ApiError::Setting("no model given".into())),
            })
            .or_raise()
        })?;
        inputs.extend(model_path);
        Ok(Self { quantizer: Some(quantizer), calibration: Calibration::None, inputs, memory })
    }

    /// The model's inputs in graph order (what a positional batch maps onto).
    fn input_names(&self) -> PyResult<Vec<String>> {
        Ok(InputSignature::of(&self.quantizer()?.model).input_names())
    }

    /// Adds one calibration batch (checked against the model now).
    fn add_batch(&mut self, batch: Vec<ArrayIn<'_>>) -> PyResult<()> {
        if matches!(self.calibration, Calibration::None) {
            let q = self.quantizer()?;
            let batches = MemoryBatches::new(&q.model, "calibration", &q.setting.data).or_raise()?;
            self.calibration = Calibration::Memory(batches);
        }
        let Calibration::Memory(batches) = &mut self.calibration else {
            return Err(setting_error("calibration was already given as a folder".into()));
        };
        let label = format!("calibration, batch {}", batches.len());
        let batch = batch_from_py(&label, batch)?;
        batches.push(batch).or_raise()
    }

    /// Calibration batches read from a folder or file, as `mppq quantize --calib` reads them.
    #[pyo3(signature = (path, reporter=None))]
    fn use_folder(&mut self, py: Python<'_>, path: PathBuf, reporter: Option<Py<PyAny>>) -> PyResult<()> {
        if !matches!(self.calibration, Calibration::None) {
            return Err(setting_error("calibration batches were already given".into()));
        }
        let q = self.quantizer()?;
        let mut progress = PythonProgress::new(reporter);
        let set = guard(|| py.detach(|| mppq_api::quantize::open_calibration(q, &path, &mut progress)).or_raise());
        let set = progress.outcome(set)?;
        self.inputs.push(path);
        self.calibration = Calibration::Set(set);
        Ok(())
    }

    /// Calibration batches given so far.
    fn batch_count(&self) -> usize {
        match &self.calibration {
            Calibration::None => 0,
            Calibration::Memory(b) => b.len(),
            Calibration::Set(s) => s.len(),
        }
    }

    /// Quantizes, exports and analyses (once per session): `mppq quantize`'s job.
    #[pyo3(signature = (reporter=None))]
    fn quantize(&mut self, py: Python<'_>, reporter: Option<Py<PyAny>>) -> PyResult<Quantized> {
        let started = std::time::Instant::now();
        let calibration = self.take_calibration()?;
        let mut q = self.quantizer.take().ok_or_else(|| setting_error("this session already quantized".into()))?;
        let dir = tempfile::Builder::new()
            .prefix("mppq-result-")
            .tempdir()
            .map_err(|source| to_py(ApiError::Io { path: std::env::temp_dir().display().to_string(), source }))?;
        let mut progress = PythonProgress::new(reporter);
        let job =
            guard(|| py.detach(|| quantize_into(&mut q, &calibration, dir.path(), &mut progress, started)).or_raise());
        self.memory = None;
        let job = progress.outcome(job)?;
        Ok(Quantized { quantizer: q, dir, job, inputs: self.inputs.clone() })
    }

    /// The analysis alone (`mppq analyse`): quantized in memory, or with `quant_config` (a
    /// `quant.json`) applied; returns the report as JSON.
    #[pyo3(signature = (quant_config=None, reporter=None))]
    fn analyse(
        &mut self,
        py: Python<'_>,
        quant_config: Option<PathBuf>,
        reporter: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let calibration = self.take_calibration()?;
        let mut q = self.quantizer.take().ok_or_else(|| setting_error("this session already ran".into()))?;
        let mut progress = PythonProgress::new(reporter);
        let report = guard(|| {
            py.detach(|| {
                match &quant_config {
                    Some(path) => mppq_api::quantize::apply_quant_config(&mut q.model, path, &q.setting.pipeline)?,
                    None => q.quantize(&calibration, &mut progress)?,
                }
                mppq_api::quantize::run_analysis(&q, &calibration, &mut progress)?.to_json()
            })
            .or_raise()
        });
        self.memory = None;
        progress.outcome(report)
    }
}

impl Session {
    fn quantizer(&self) -> PyResult<&ModelQuantizer> {
        self.quantizer.as_ref().ok_or_else(|| setting_error("this session already ran".into()))
    }

    fn take_calibration(&mut self) -> PyResult<CalibrationSet> {
        match std::mem::replace(&mut self.calibration, Calibration::None) {
            Calibration::None => Err(crate::errors::data_error("no calibration data was given".into())),
            Calibration::Memory(batches) => batches.finish().or_raise(),
            Calibration::Set(set) => Ok(set),
        }
    }
}

/// A quantized model: its files (in a temporary folder until [`Quantized::save`]), its
/// summary, and the quantized graph for simulation and further exports.
#[pyclass(module = "mppq_rs._native", unsendable)]
pub struct Quantized {
    quantizer: ModelQuantizer,
    dir: tempfile::TempDir,
    job: JobSummary,
    inputs: Vec<PathBuf>,
}

#[pymethods]
impl Quantized {
    /// (what, file name) of every file written: the exporters', then the report's.
    fn files(&self) -> Vec<(String, String)> {
        self.job.files.iter().map(|(what, path)| (what.clone(), self.relative(path))).collect()
    }

    /// The bytes of one of [`Self::files`].
    fn read(&self, file_name: &str) -> PyResult<Vec<u8>> {
        let known = self.job.files.iter().any(|(_, p)| self.relative(p) == file_name);
        if !known {
            return Err(setting_error(format!("`{file_name}` is not a file of this result (see .files)")));
        }
        let path = self.dir.path().join(file_name);
        std::fs::read(&path).map_err(|source| to_py(ApiError::Io { path: path.display().to_string(), source }))
    }

    /// The inputs of the quantized model, in graph order.
    fn input_names(&self) -> Vec<String> {
        InputSignature::of(&self.quantizer.model).input_names()
    }

    /// The line `mppq quantize` ends with.
    fn summary(&self) -> String {
        self.job.summary_line()
    }

    /// What the run decided that the user should know (opset conversion, data notes, budget).
    fn notes(&self) -> Vec<String> {
        let job = &self.job;
        let upgrade = job.opset_upgrade.iter().map(|u| format!("model converted from {u}"));
        let cap = job.opset_cap.iter().map(|c| c.to_string());
        let data = job.data_notes.iter().map(|n| format!("calibration data: {n}"));
        let budget = job.budget.iter().map(|b| b.to_string());
        upgrade.chain(cap).chain(data).chain(budget).collect()
    }

    /// Moves copies of every file into `dir` (created if needed) as `mppq quantize -o dir`
    /// leaves them: together, never over the model or the calibration data.
    fn save(&self, dir: PathBuf) -> PyResult<Vec<(String, String)>> {
        self.staged(&dir, |staging| {
            let mut files = Vec::with_capacity(self.job.files.len());
            for (what, path) in &self.job.files {
                let to = staging.join(self.relative(path));
                std::fs::copy(path, &to).map_err(|source| ApiError::Io { path: to.display().to_string(), source })?;
                files.push((what.clone(), to));
            }
            Ok(files)
        })
    }

    /// Runs one registered exporter with `options` (JSON, its `[export.NAME]` keys) into `dir`.
    fn export(&self, name: &str, options: &str, dir: PathBuf) -> PyResult<Vec<(String, String)>> {
        let options: serde_json::Value =
            serde_json::from_str(options).map_err(|e| setting_error(format!("export options: {e}")))?;
        let q = &self.quantizer;
        let sections = std::collections::BTreeMap::from([(name.to_string(), options)]);
        let exporters = mppq_api::export::resolve_exporters(
            Some(&[name.to_string()]),
            &sections,
            &q.platform.exporters(),
            &q.platform.export_options(),
        )
        .map_err(ApiError::from)
        .or_raise()?;
        self.staged(&dir, |staging| {
            let files = mppq_api::export::export_all(&q.model, &exporters, staging)?;
            Ok(files.into_iter().map(|a| (a.what, a.path)).collect())
        })
    }

    /// The quantization simulation on one batch: the graph outputs.
    fn run<'py>(&self, py: Python<'py>, batch: Vec<ArrayIn<'py>>) -> PyResult<Vec<ArrayOut<'py>>> {
        let feeds = batch_from_py("run inputs", batch)?;
        let q = &self.quantizer;
        let outputs = guard(|| {
            py.detach(|| {
                InputSignature::of(&q.model).check_batch(Path::new("run inputs"), &feeds)?;
                to_data(q.simulate(to_values(feeds, q.device())?)?)
            })
            .or_raise()
        })?;
        batch_to_py(py, &outputs)
    }
}

impl Quantized {
    /// Runs `write` into a staging folder of `dir` and moves what it lists into `dir` together
    /// ([`mppq_api::staging`]: never over the files this result was made from).
    fn staged(
        &self,
        dir: &Path,
        write: impl FnOnce(&Path) -> Result<Vec<(String, PathBuf)>, ApiError>,
    ) -> PyResult<Vec<(String, String)>> {
        guard(|| {
            let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
            let staging = mppq_api::staging::Staging::new(dir, &inputs).or_raise()?;
            let written = write(staging.path()).or_raise()?;
            let files = staging.commit(written).or_raise()?;
            Ok(files.into_iter().map(|(w, p)| (w, p.display().to_string())).collect())
        })
    }

    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(self.dir.path()).unwrap_or(path).display().to_string()
    }
}
