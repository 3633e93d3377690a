//! `ppl-cuda-json`: OpenPPL's quantization parameters (`ppl_cuda.json`), the JSON PPQ's
//! `PPLBackendExporter` writes beside the float ONNX model for PPL CUDA's int8 engine:
//! `{"quant_info": {tensor: {bit_width, per_channel, quant_flag, sym, scale, zero_point,
//! tensor_min, tensor_max, q_min, q_max, hash, dominator}}, "op_info": {op: {"data_type": "INT8"}}}`.
//! Every quantized tensor of at most 8 bits is listed (biases are not: PPL derives them);
//! `scale` and `zero_point` are numbers per tensor, lists per channel; `tensor_min`/`tensor_max` are
//! what the grid covers, `scale · (q_min − zero_point)` and `scale · (q_max − zero_point)`. PPQ's
//! `hash` and `dominator` were Python object hashes grouping tensors that share parameters; each
//! row here is already one such group, so both are the row's index.

use crate::error::{ExportError, Result};
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
use crate::ranges::rows;
use mppq_ir::Model;
use mppq_ir::quant::TargetPrecision;
use serde_json::{Value, json};
use std::path::Path;

pub struct PplCudaJson;

/// The file name the `ppl-cuda-json` exporter writes.
pub const FILE: &str = "ppl_cuda.json";

impl Exporter for PplCudaJson {
    fn name(&self) -> &str {
        "ppl-cuda-json"
    }
    fn description(&self) -> &str {
        "OpenPPL CUDA's quantization parameters (ppl_cuda.json, as PPQ's PPL exporter writes them), for the float model"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let path = dir.join(FILE);
        let text = serde_json::to_string_pretty(&ppl_json(model)?).map_err(|e| ExportError::Setting(e.to_string()))?;
        write_file(&path, text.as_bytes())?;
        Ok(vec![Artifact::new("OpenPPL quantization parameters", path)])
    }
}

/// One number for a per-tensor value, a list per channel (as PPQ's `convert_value`).
fn number_or_list(values: &[f64], per_channel: bool) -> Value {
    match values {
        [v] if !per_channel => json!(v),
        many => json!(many),
    }
}

/// The JSON of `model`'s integer configs of at most 8 bits.
pub fn ppl_json(model: &Model) -> Result<Value> {
    let mut quant_info = serde_json::Map::new();
    let integer = rows(model)?.into_iter().filter(|r| !r.is_fused() && r.is_integer() && r.entry.bits <= 8);
    for (index, row) in integer.enumerate() {
        let e = &row.entry;
        let per_channel = e.policy.is_per_channel();
        let scale: Vec<f64> = e.scale.iter().map(|s| f64::from(*s)).collect();
        let zero: Vec<f64> = e.zero_point.iter().map(|z| f64::from(*z)).collect();
        let bound = |q: i64| -> Vec<f64> { scale.iter().zip(&zero).map(|(s, z)| s * (q as f64 - z)).collect() };
        quant_info.insert(
            row.name.clone(),
            json!({
                "bit_width": e.bits,
                "per_channel": per_channel,
                "quant_flag": true,
                "sym": e.policy.is_symmetric(),
                "scale": number_or_list(&scale, per_channel),
                "zero_point": number_or_list(&zero, per_channel),
                "tensor_min": number_or_list(&bound(e.quant_min), per_channel),
                "tensor_max": number_or_list(&bound(e.quant_max), per_channel),
                "q_min": e.quant_min,
                "q_max": e.quant_max,
                "hash": index,
                "dominator": index,
            }),
        );
    }
    let mut op_info = serde_json::Map::new();
    for (_, op) in model.graph.operations() {
        if op.precision == TargetPrecision::Int8 {
            op_info.insert(op.name.clone(), json!({"data_type": "INT8"}));
        }
    }
    Ok(json!({"quant_info": quant_info, "op_info": op_info}))
}
