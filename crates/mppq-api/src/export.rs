//! Writing and reading back quantization results: the QDQ ONNX model ONNX Runtime runs, the JSON of
//! every tensor's quantization parameters, and applying such a JSON to a float model (so a saved
//! quantization can be simulated or analysed again without recalibrating). Files are written
//! to a temporary name and renamed: an existing file is only replaced by a complete one.

use crate::error::{ApiError, Result};
use mppq_ir::Model;
use mppq_onnx::export::qdq::{QdqOptions, export_qdq};
use mppq_onnx::export::quant_json::{apply_quant_json, read_quant_json, write_quant_json};
use std::path::Path;

/// Writes `model` (with calibrated configs) as a QDQ ONNX model at `path`.
pub fn write_qdq(model: &Model, path: &Path, options: &QdqOptions) -> Result<()> {
    let qdq = export_qdq(model, options)?;
    mppq_onnx::save_model(&qdq, path, &Default::default())?;
    Ok(())
}

/// Writes every tensor's quantization parameters and every op's precision as JSON.
pub fn write_quant_config(model: &Model, path: &Path) -> Result<()> {
    Ok(write_quant_json(model, path)?)
}

/// Puts the configs of a quant JSON (written by [`write_quant_config`]) back on a float model:
/// the original model or the fused `model.float.onnx` — the structural fusions of `pipeline`
/// (BN folding) are applied first, as quantization did, so the JSON's names match either way.
pub fn apply_quant_config(model: &mut Model, path: &Path, pipeline: &mppq_passes::PipelineSetting) -> Result<()> {
    let json = read_quant_json(path)?;
    if pipeline.fusion.bn_fold {
        mppq_ir::morph::fold_batchnorm(&mut model.graph)?;
    }
    apply_quant_json(&mut model.graph, &json).map_err(|e| ApiError::Setting(format!("{}: {e}", path.display())))
}
