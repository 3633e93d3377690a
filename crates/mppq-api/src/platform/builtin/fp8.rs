//! `fp8-e4m3` / `fp8-e5m2`: 8-bit floating point, per-tensor activations and per-channel weights,
//! written as standard FLOAT8 Q/DQ (opset 19).

use crate::error::Result;
use crate::platform::{Platform, QuantizerOptions};
use mppq_quant::quantizer::{Fp8Format, Fp8Quantizer, Quantizer};

/// `fp8-e4m3` / `fp8-e5m2`: 8-bit floating point.
pub(crate) struct Fp8 {
    pub name: &'static str,
    pub format: Fp8Format,
}

impl Platform for Fp8 {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        match self.format {
            Fp8Format::E4M3 => "FP8 E4M3 (max 448): per-tensor activations, per-channel weights",
            Fp8Format::E5M2 => "FP8 E5M2 (max 57344): per-tensor activations, per-channel weights",
        }
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name, &[])?;
        Ok(Box::new(Fp8Quantizer::new(self.format)))
    }
    /// FP8 Q/DQ is standard ONNX (opset 19): written, although ONNX Runtime 1.31 runs it only
    /// with its graph optimisations at `basic` (TensorRT and other FP8 runtimes load it as is).
    fn export_options(&self) -> std::collections::BTreeMap<String, crate::export::ExportOptions> {
        [("qdq".to_string(), serde_json::json!({"allow_fp8": true}))].into_iter().collect()
    }
}
