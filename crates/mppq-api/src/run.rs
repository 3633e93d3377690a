//! Running a model on user data (`mppq run`): feeds from `.npz`/`.npy` files checked against the
//! graph's declared inputs, outputs back as IR tensors.

use crate::error::{ApiError, Result};
use mppq_exec::{Device, Executor, OpRegistry, Tensor, Value};
use mppq_ir::{Dim, Model, TensorData};
use std::path::Path;

/// Reads a feed file: an `.npz` (keys = input names) or, for a single-input model, an `.npy`.
pub fn read_feeds(model: &Model, path: &Path) -> Result<Vec<(String, TensorData)>> {
    let g = &model.graph;
    let inputs: Vec<String> = g.feed_inputs().iter().map(|id| g.var_name(*id).to_string()).collect();
    let arrays = match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => {
            if inputs.len() != 1 {
                return Err(ApiError::data(
                    path,
                    format!(
                        "a .npy file can feed a single-input model; this one has {} inputs ({}): use .npz",
                        inputs.len(),
                        inputs.join(", ")
                    ),
                ));
            }
            vec![(inputs[0].clone(), crate::npy::read_npy(path)?)]
        }
        _ => crate::npy::read_npz(path)?,
    };
    for (name, data) in &arrays {
        if !inputs.contains(name) {
            return Err(ApiError::data(
                path,
                format!("array `{name}` matches no graph input (inputs: {})", inputs.join(", ")),
            ));
        }
        check_declared(model, path, name, data)?;
    }
    if let Some(missing) = inputs.iter().find(|n| !arrays.iter().any(|(a, _)| a == *n)) {
        return Err(ApiError::data(path, format!("no array for input `{missing}`")));
    }
    Ok(arrays)
}

/// Checks a feed against the input's declared element type and shape (symbolic dims match any size).
fn check_declared(model: &Model, path: &Path, name: &str, data: &TensorData) -> Result<()> {
    let g = &model.graph;
    let Some(ty) = g.var_id(name).and_then(|id| g.variable(id).ok()?.ty.clone()) else { return Ok(()) };
    let Some(t) = ty.as_tensor() else { return Ok(()) };
    if let Some(dt) = t.dtype
        && dt != data.dtype()
    {
        return Err(ApiError::data(path, format!("input `{name}` must be {dt}, the file holds {}", data.dtype())));
    }
    if let Some(dims) = &t.shape {
        // Exporters write a dynamic dimension as a name, as nothing, or as -1 or 0 (PaddlePaddle,
        // old tf2onnx): only a positive value fixes the size.
        let fits = dims.len() == data.rank()
            && dims.iter().zip(data.shape()).all(|(d, s)| !matches!(d, Dim::Known(k) if *k > 0 && *k != *s as i64));
        if !fits {
            return Err(ApiError::data(
                path,
                format!("input `{name}` must have shape {ty}, the file holds {:?}", data.shape()),
            ));
        }
    }
    Ok(())
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
    let values = feeds
        .into_iter()
        .map(|(n, d)| {
            Tensor::from_data(&d, device)
                .map(|t| (n.clone(), Value::Tensor(t)))
                .map_err(|e| ApiError::Data { file: n.clone(), message: e.to_string() })
        })
        .collect::<Result<Vec<_>>>()?;
    let outputs = if simulate {
        let mut sim = mppq_exec::QuantSimulation::new(&model.graph, mppq_exec::BurnFakeQuant);
        exec.run(values, &mut [&mut sim])?
    } else {
        exec.run(values, &mut [])?
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::{DataType, Graph, TensorType, ValueType, Variable};

    fn model_with_input(dims: Vec<Dim>) -> Model {
        let mut g = Graph::new("g");
        let mut x = Variable::new("x");
        x.ty = Some(ValueType::Tensor(TensorType::new(DataType::Float, dims)));
        let x = g.add_variable(x).unwrap();
        g.add_graph_input(x).unwrap();
        Model::new(g, 17)
    }

    #[test]
    fn negative_zero_and_named_dims_take_any_size() {
        let data = TensorData::from_vec(vec![6, 3, 48], &vec![0f32; 6 * 3 * 48]).unwrap();
        let path = Path::new("batch.npy");
        for first in [Dim::Known(-1), Dim::Known(0), Dim::Symbolic("n".into()), Dim::Unknown] {
            let m = model_with_input(vec![first.clone(), Dim::Known(3), Dim::Known(-1)]);
            assert!(check_declared(&m, path, "x", &data).is_ok(), "{first:?}");
        }
        let fixed = model_with_input(vec![Dim::Known(6), Dim::Known(4), Dim::Known(-1)]);
        let err = check_declared(&fixed, path, "x", &data).unwrap_err().to_string();
        assert!(err.contains("batch.npy") && err.contains("[6, 3, 48]"), "{err}");
    }
}
