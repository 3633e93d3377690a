//! Running a model on user data (`mppq run`): feeds from `.npz`/`.npy` files checked against the
//! graph's declared inputs, outputs back as IR tensors.

use crate::error::{ApiError, Result};
use mppq_exec::{Device, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Model, TensorData};
use std::path::Path;

/// Reads a feed file: an `.npz` (keys = input names) or, for a single-input model, an `.npy`,
/// checked against the graph's declared inputs.
pub fn read_feeds(model: &Model, path: &Path) -> Result<Vec<(String, TensorData)>> {
    crate::data::calib::InputSignature::of(model).read_arrays(path)
}

/// The feed files `path` names: itself, or every `.npy`/`.npz` of a directory in name order.
pub fn input_files(path: &Path) -> Result<Vec<std::path::PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let io = |source| ApiError::Io { path: path.display().to_string(), source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("npy" | "npz")) {
            files.push(p);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(ApiError::data(path, "no .npy or .npz files in this directory"));
    }
    Ok(files)
}

/// Reads the model at `path` (any registered format) as `mppq run` runs it: [`prepare_for_run`].
pub fn load_for_run(path: &Path, quant_config: Option<&Path>) -> Result<Model> {
    let model = crate::platform::parser::parse_model(path, None)?;
    prepare_for_run(path, model, quant_config)
}

/// Checks `model` (read from `source`) and prepares it to run as ONNX Runtime would run it: Q/DQ
/// convolutions fused into integer kernels, and with `quant_config` (a `quant.json` written by
/// `mppq quantize`) that quantization applied for simulation.
pub fn prepare_for_run(source: &Path, mut model: Model, quant_config: Option<&Path>) -> Result<Model> {
    crate::quantize::check_model(source, &model)?;
    mppq_ir::morph::fuse_qdq_conv(&mut model.graph)?;
    if let Some(path) = quant_config {
        crate::quantize::apply_quant_config(&mut model, path, &Default::default())?;
    }
    Ok(model)
}

/// Runs `model` once on `feeds` with the built-in operators; returns the graph outputs.
pub fn run_model(
    model: &Model,
    feeds: Vec<(String, TensorData)>,
    device: &Device,
) -> Result<Vec<(String, TensorData)>> {
    run_model_with(model, feeds, device, false)
}

/// Like [`run_model`]; with `simulate`, the quantization configs the model's operations carry are
/// applied (fake-quant simulation).
pub fn run_model_with(
    model: &Model,
    feeds: Vec<(String, TensorData)>,
    device: &Device,
    simulate: bool,
) -> Result<Vec<(String, TensorData)>> {
    let opsets = |d: &str| model.opset(d).unwrap_or(0);
    let exec = Executor::new(&model.graph, &OpRegistry::builtin(), device, &opsets)?;
    let values = to_values(feeds, device)?;
    let outputs = if simulate {
        let mut sim = mppq_exec::QuantSimulation::new(&model.graph, mppq_exec::BurnFakeQuant);
        exec.run(values, &mut [&mut sim])?
    } else {
        exec.run(values, &mut [])?
    };
    to_data(outputs)
}

/// Feeds as executor values on `device`.
pub fn to_values(feeds: Vec<(String, TensorData)>, device: &Device) -> Result<Vec<(String, Value)>> {
    feeds
        .into_iter()
        .map(|(n, d)| {
            Tensor::from_data(&d, device)
                .map(|t| (n.clone(), Value::Tensor(t)))
                .map_err(|e| ApiError::Data { file: n.clone(), message: e.to_string() })
        })
        .collect()
}

/// Graph outputs as IR tensors (an output that is not a tensor is an error).
pub fn to_data(outputs: Vec<(String, Value)>) -> Result<Vec<(String, TensorData)>> {
    outputs
        .into_iter()
        .map(|(name, v)| match v {
            Value::Tensor(t) => Ok((name, t.to_data()?)),
            _ => Err(ApiError::Data { file: name, message: "output is not a tensor".into() }),
        })
        .collect()
}

/// A file name for an output (anything outside `[A-Za-z0-9_.-]` becomes `_`).
pub fn output_file_name(name: &str) -> String {
    let clean: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect();
    format!("{clean}.npy")
}

/// File names for all of a run's outputs: [`output_file_name`], with `_2`, `_3`, ... added where
/// two names would become the same file (`out:0` and `out/0`), so no output overwrites another.
pub fn output_file_names(names: &[&str]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    names
        .iter()
        .map(|name| {
            let base = output_file_name(name);
            let stem = base.trim_end_matches(".npy").to_string();
            let mut candidate = base;
            let mut k = 2;
            while !used.insert(candidate.to_ascii_lowercase()) {
                candidate = format!("{stem}_{k}.npy");
                k += 1;
            }
            candidate
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn outputs_whose_names_clash_get_distinct_files() {
        let names = super::output_file_names(&["out:0", "out/0", "out_0", "y"]);
        assert_eq!(names, ["out_0.npy", "out_0_2.npy", "out_0_3.npy", "y.npy"]);
    }
}
