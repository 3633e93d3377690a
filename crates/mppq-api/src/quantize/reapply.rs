//! Re-applying a saved quantization: [`apply_quant_config`] puts a `quant.json` (written by the
//! `quant-json` exporter) back on a float model, converted and folded as quantization did, for
//! `mppq run --quant-config` and `mppq analyse --quant-config`.

use crate::error::{ApiError, Result};
use mppq_export::formats::quant_json::{apply_quant_json, read_quant_json};
use mppq_ir::Model;
use std::path::Path;

/// Puts the configs of a quant JSON (written by the `quant-json` exporter) back on a float model:
/// the original model or the fused `model.float.onnx` — the opset conversion of a model older
/// than 13 and the structural fusions of `pipeline` (constant and BN folding) are applied first,
/// as quantization did, so the JSON's names match either way.
pub fn apply_quant_config(model: &mut Model, path: &Path, pipeline: &mppq_passes::PipelineSetting) -> Result<()> {
    crate::staging::check_complete(path)?;
    let json = read_quant_json(path)?;
    crate::model::upgrade::upgrade_for_quantization(model)?;
    model.graph.name_operations();
    if pipeline.fusion.constant_fold {
        let imports = model.opset_imports.clone();
        let opsets = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let (registry, device) = (mppq_exec::OpRegistry::builtin(), mppq_exec::Device::cpu());
        mppq_passes::structural::fold_constants::fold_all_constants(&mut model.graph, &registry, &device, &opsets)?;
    }
    if pipeline.fusion.bn_fold {
        mppq_passes::structural::fold_batchnorm::fold_all(&mut model.graph)?;
    }
    // The JSON is the user's file: name it, not a setting.
    apply_quant_json(&mut model.graph, &json).map_err(|e| match e {
        mppq_export::ExportError::Json { message, .. } => {
            ApiError::data(path, format!("quantization JSON does not fit the model: {message}"))
        }
        other => ApiError::data(path, other.to_string()),
    })?;
    // After applying: the bodies then hold the copies of enclosing weights quantization made.
    if !json.made_for_weights_of(&model.graph) {
        // Simulating the user's weights with parameters made for others was silently wrong
        // (ResNet-18 after training: 8.1 dB here, 12.7 dB in the export).
        return Err(ApiError::data(
            path,
            "was made for other weights than this model's: the quantization passes changed them (equalization, \
             bias correction, training, …); give the float model written beside it (model.float.onnx)",
        ));
    }
    Ok(())
}
