//! The opset a model is quantized at. A model below opset 13 (the lowest the QDQ export
//! writes: per-channel QuantizeLinear/DequantizeLinear need it) is converted to 13 when it is
//! loaded for quantization ([`mppq_onnx::upgrade_model`]), so the executor, the dispatch,
//! calibration and every export see one converted graph, and a quantization JSON written from
//! it applies to the same graph ([`crate::quantize::apply_quant_config`] converts too).

use mppq_ir::Model;
use mppq_ir::morph::{OpsetBlocker, OpsetUpgrade, blockers};

/// The default-domain opset models are quantized at, at least.
pub const QUANTIZATION_OPSET: i64 = 13;

/// The lowest opset with QuantizeLinear/DequantizeLinear (per-tensor only).
pub const PER_TENSOR_QDQ_OPSET: i64 = 10;

/// A model that cannot reach [`QUANTIZATION_OPSET`]: it is quantized at `at` (10–12), where
/// Q/DQ exists per tensor only, so every weight gets one scale (`mppq_passes::configuration::per_tensor_below_opset13`).
#[derive(Clone, Debug)]
pub struct OpsetCap {
    pub at: i64,
    /// The operations that cannot be converted to 13, each with what would fix it.
    pub blockers: Vec<OpsetBlocker>,
}

impl std::fmt::Display for OpsetCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "model quantized at opset {} with per-tensor weights: ", self.at)?;
        let list: Vec<String> = self.blockers.iter().map(|b| b.to_string()).collect();
        write!(f, "{} (per-channel Q/DQ needs opset {QUANTIZATION_OPSET})", list.join("; "))
    }
}

/// What loading a model for quantization did to its opset.
#[derive(Clone, Debug, Default)]
pub struct OpsetPlan {
    /// The conversion (to 13, or to the cap when that is above the model's opset).
    pub upgrade: Option<OpsetUpgrade>,
    /// Set when the model cannot reach 13 but can reach 10–12.
    pub cap: Option<OpsetCap>,
}

/// Converts `model` to [`QUANTIZATION_OPSET`] when it is older and every operation can be
/// converted. When some operation cannot be, the model keeps its opset (one below 10 is converted
/// to 10) and is quantized per tensor there ([`OpsetCap`]): Q/DQ exist from opset 10, their
/// per-channel form only from 13. A model that cannot even reach 10 stays as it is and the QDQ
/// export's preflight refuses it, naming each operation and what would fix it. An error is a malformed operation (an attribute of the
/// wrong kind) met while converting.
pub fn upgrade_for_quantization(model: &mut Model) -> crate::Result<OpsetPlan> {
    // A model without default-domain import has nothing to convert.
    let Some(from) = model.opset("") else { return Ok(OpsetPlan::default()) };
    if from >= QUANTIZATION_OPSET {
        return Ok(OpsetPlan::default());
    }
    let blocking = blockers(&model.graph, from, QUANTIZATION_OPSET);
    if blocking.is_empty() {
        let upgrade = mppq_onnx::upgrade_model(model, QUANTIZATION_OPSET)?;
        return Ok(OpsetPlan { upgrade: Some(upgrade), cap: None });
    }
    // No conversion beyond what Q/DQ need: the model's own opset, or 10 for an older one.
    let at = from.max(PER_TENSOR_QDQ_OPSET);
    if at > from && !blockers(&model.graph, from, at).is_empty() {
        return Ok(OpsetPlan::default());
    }
    let upgrade = if at > from { Some(mppq_onnx::upgrade_model(model, at)?) } else { None };
    Ok(OpsetPlan { upgrade, cap: Some(OpsetCap { at, blockers: blocking }) })
}
