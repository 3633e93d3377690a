//! The opset a model is quantized at. A model below opset 13 (the lowest the QDQ export
//! writes: per-channel QuantizeLinear/DequantizeLinear need it) is converted to 13 when it is
//! loaded for quantization ([`mppq_onnx::upgrade_model`]), so the executor, the dispatch,
//! calibration and every export see one converted graph, and a quantization JSON written from
//! it applies to the same graph ([`crate::export::apply_quant_config`] converts too).

use mppq_ir::Model;
use mppq_ir::morph::OpsetUpgrade;

/// The default-domain opset models are quantized at, at least.
pub const QUANTIZATION_OPSET: i64 = 13;

/// Converts `model` to [`QUANTIZATION_OPSET`] when it is older and every operation can be
/// converted; returns what was rewritten. A model with an operation that cannot be converted
/// stays as it is: the exports that need the newer opset refuse it in their preflight, naming
/// the operation and what would fix it. An error is a malformed operation (an attribute of the
/// wrong kind) met while converting.
pub fn upgrade_for_quantization(model: &mut Model) -> crate::Result<Option<OpsetUpgrade>> {
    // A model without default-domain import has nothing to convert.
    let Some(from) = model.opset("") else { return Ok(None) };
    if from >= QUANTIZATION_OPSET || !mppq_ir::morph::blockers(&model.graph, from, QUANTIZATION_OPSET).is_empty() {
        return Ok(None);
    }
    Ok(Some(mppq_onnx::upgrade_model(model, QUANTIZATION_OPSET)?))
}
