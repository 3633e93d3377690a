//! The one-call functions: what a model holds (`info`), running a model or its quantization
//! config (`run_model`), and the registries (`platforms`, `exporters`), as JSON the Python side
//! turns into dicts.

use crate::arrays::{ArrayIn, ArrayOut, batch_from_py, batch_to_py};
use crate::errors::{OrRaise, guard, setting_error};
use mppq_api::ApiError;
use mppq_api::ir::Model;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(run_model, m)?)?;
    m.add_function(wrap_pyfunction!(platforms, m)?)?;
    m.add_function(wrap_pyfunction!(exporters, m)?)?;
    m.add_function(wrap_pyfunction!(host_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(input_names, m)?)?;
    Ok(())
}

/// A model from a path (any registered format) or ONNX bytes (named `label` in errors).
fn read_model(path: Option<&Path>, bytes: Option<Vec<u8>>, label: &str) -> Result<Model, ApiError> {
    match (path, bytes) {
        (Some(path), _) => mppq_api::platform::parser::parse_model(path, None),
        (None, Some(bytes)) => Ok(mppq_api::onnx::load_model_from_bytes(&bytes, None, label)?),
        (None, None) => Err(ApiError::Setting("no model given".into())),
    }
}

/// What `mppq info --json` prints.
#[pyfunction]
#[pyo3(signature = (model_path, model_bytes, label))]
fn info(py: Python<'_>, model_path: Option<PathBuf>, model_bytes: Option<Vec<u8>>, label: &str) -> PyResult<String> {
    guard(|| {
        py.detach(|| {
            let model = read_model(model_path.as_deref(), model_bytes, label)?;
            serde_json::to_string(&mppq_api::ModelInfo::new(&model)).map_err(|e| ApiError::Setting(e.to_string()))
        })
        .or_raise()
    })
}

/// The inputs a run of the model must feed, in graph order.
#[pyfunction]
#[pyo3(signature = (model_path, model_bytes, label))]
fn input_names(
    py: Python<'_>,
    model_path: Option<PathBuf>,
    model_bytes: Option<Vec<u8>>,
    label: &str,
) -> PyResult<Vec<String>> {
    guard(|| {
        py.detach(|| read_model(model_path.as_deref(), model_bytes, label))
            .map(|model| mppq_api::data::calib::InputSignature::of(&model).input_names())
            .or_raise()
    })
}

/// `mppq run`: the model's outputs on one batch; with `quant_config`, its quantization simulated.
#[pyfunction]
#[pyo3(signature = (model_path, model_bytes, label, batch, quant_config=None))]
fn run_model<'py>(
    py: Python<'py>,
    model_path: Option<PathBuf>,
    model_bytes: Option<Vec<u8>>,
    label: &str,
    batch: Vec<ArrayIn<'py>>,
    quant_config: Option<PathBuf>,
) -> PyResult<Vec<ArrayOut<'py>>> {
    let feeds = batch_from_py("run inputs", batch)?;
    let outputs = guard(|| {
        py.detach(|| {
            let model = read_model(model_path.as_deref(), model_bytes, label)?;
            let source = model_path.clone().unwrap_or_else(|| PathBuf::from(label));
            let model = mppq_api::model::run::prepare_for_run(&source, model, quant_config.as_deref())?;
            mppq_api::data::calib::InputSignature::of(&model).check_batch(Path::new("run inputs"), &feeds)?;
            let device = mppq_api::exec::Device::default();
            mppq_api::model::run::run_model_with(&model, feeds, &device, quant_config.is_some())
        })
        .or_raise()
    })?;
    batch_to_py(py, &outputs)
}

/// The registered platforms: name, description, dispatcher, exporters (JSON list).
#[pyfunction]
fn platforms() -> PyResult<String> {
    let mut list = Vec::new();
    for name in mppq_api::platform::platform_names() {
        let p = mppq_api::platform_by_name(&name).or_raise()?;
        list.push(serde_json::json!({
            "name": name,
            "description": p.description(),
            "dispatcher": p.dispatcher(),
            "exporters": p.exporters(),
        }));
    }
    serde_json::to_string(&list).map_err(|e| setting_error(e.to_string()))
}

/// The registered exporters: name, description, default options (JSON list).
#[pyfunction]
fn exporters() -> PyResult<String> {
    let mut list = Vec::new();
    for name in mppq_api::export::exporter_names() {
        let e = mppq_api::exporter_by_name(&name).map_err(ApiError::from).or_raise()?;
        list.push(serde_json::json!({
            "name": name,
            "description": e.description(),
            "options": e.default_options(),
        }));
    }
    serde_json::to_string(&list).map_err(|e| setting_error(e.to_string()))
}

/// This machine's CPU class (what `mppq info` prints), and its description.
#[pyfunction]
fn host_cpu() -> (String, String) {
    let host = mppq_api::quant::quantizer::TargetCpu::host();
    (host.to_string(), host.describe().to_string())
}
