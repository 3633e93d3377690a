//! `default`: ONNX Runtime's QDQ format on CPU (uint8 asymmetric activations, int8 symmetric
//! per-channel weights, int32 biases), for a `target_cpu` class: `any` keeps 8-bit weights
//! within the pair limit of x86 CPUs without VNNI, so the export is exact on every CPU.

use crate::error::{ApiError, Result};
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer, TargetCpu};

/// `default`: ONNX Runtime's QDQ format on CPU.
pub(crate) struct OnnxRuntime;

impl Platform for OnnxRuntime {
    fn name(&self) -> &str {
        "default"
    }
    fn description(&self) -> &str {
        "ONNX Runtime QDQ: uint8 asymmetric activations, int8 symmetric per-channel weights (within the x86 AVX2 pair limit unless target_cpu is x86-vnni or arm64), int32 biases"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::WeightBits, O::Observer, O::ReduceRange, O::TargetCpu])?;
        let mut q = OnnxRuntimeQuantizer { target_cpu: Some(o.target_cpu.unwrap_or_default()), ..Default::default() };
        // 8-bit weights by default (within the x86 pair limit for targets that may saturate);
        // ORT's `reduce_range` (7-bit weights) is exact everywhere at half the resolution.
        if o.reduce_range == Some(true) {
            if o.weight_bits.is_some_and(|b| b != 7) {
                return Err(ApiError::Setting(
                    "platform `default`: reduce_range means 7-bit weights; leave weight_bits out or set it to 7".into(),
                ));
            }
            q.weight_bits = 7;
        }
        if let Some(bits) = o.weight_bits {
            if !(2..=8).contains(&bits) {
                return Err(ApiError::Setting(format!("platform `default`: weight_bits {bits} is outside 2..=8")));
            }
            q.weight_bits = bits;
        }
        if let Some(observer) = o.observer {
            q.observer = observer;
        }
        Ok(Box::new(q))
    }
    fn target_cpu(&self, o: &QuantizerOptions) -> Option<TargetCpu> {
        Some(o.target_cpu.unwrap_or_default())
    }
}

/// `ort-int8`: the `default` scheme, also writing ONNX Runtime's calibration cache, so ORT's own
/// `quantize_static` (and ModelOpt, which reads the same file) can quantize from our ranges.
pub(crate) struct OrtInt8;

impl Platform for OrtInt8 {
    fn name(&self) -> &str {
        "ort-int8"
    }
    fn description(&self) -> &str {
        "ONNX Runtime QDQ as `default`, plus ORT's calibration cache (calibration_cache.json) for quantize_static"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        OnnxRuntime.quantizer(o)
    }
    fn target_cpu(&self, o: &QuantizerOptions) -> Option<TargetCpu> {
        OnnxRuntime.target_cpu(o)
    }
    fn exporters(&self) -> Vec<String> {
        let mut exporters: Vec<String> = crate::export::DEFAULT_EXPORTERS.iter().map(|e| e.to_string()).collect();
        exporters.push("ort-calib-cache".into());
        exporters
    }
}
