//! The built-in platforms. Each maps the user's [`QuantizerOptions`] onto its quantizer and
//! refuses the options its target fixes (an option is never silently ignored).

use crate::error::{ApiError, Result};
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::{
    Fp8Format, Fp8Quantizer, LowBitQuantizer, OnnxRuntimeQuantizer, Quantizer, TensorRtQuantizer,
};
use std::sync::Arc;

/// Every built-in platform.
pub(crate) fn builtin() -> Vec<Arc<dyn Platform>> {
    vec![
        Arc::new(OnnxRuntime),
        Arc::new(TensorRt),
        Arc::new(LowBit),
        Arc::new(Fp8 { name: "fp8-e4m3", format: Fp8Format::E4M3 }),
        Arc::new(Fp8 { name: "fp8-e5m2", format: Fp8Format::E5M2 }),
    ]
}

/// `default`: ONNX Runtime's QDQ format on CPU.
struct OnnxRuntime;

impl Platform for OnnxRuntime {
    fn name(&self) -> &str {
        "default"
    }
    fn description(&self) -> &str {
        "ONNX Runtime QDQ: uint8 asymmetric activations, int8 symmetric per-channel weights (7-bit with reduce_range, for x86 CPUs without VNNI), int32 biases"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::WeightBits, O::Observer, O::ReduceRange])?;
        let mut q = OnnxRuntimeQuantizer::default();
        // 8-bit weights by default; ORT's `reduce_range` (7-bit weights) keeps its integer kernels
        // exact on x86 CPUs without VNNI, where 8-bit products saturate.
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
}

/// `trt-int8`: TensorRT-style symmetric int8.
struct TensorRt;

impl Platform for TensorRt {
    fn name(&self) -> &str {
        "trt-int8"
    }
    fn description(&self) -> &str {
        "TensorRT-style: int8 symmetric per-tensor activations, int8 symmetric per-channel weights"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut q = TensorRtQuantizer::default();
        if let Some(observer) = o.observer {
            q.observer = observer;
        }
        Ok(Box::new(q))
    }
}

/// `lowbit`: every choice open (2–8 bits, symmetry, granularity).
struct LowBit;

impl Platform for LowBit {
    fn name(&self) -> &str {
        "lowbit"
    }
    fn description(&self) -> &str {
        "low-bit linear: 2-8 bit weights and activations (default w4/a8), symmetric or not, per-channel or not"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Bits, O::WeightBits, O::PerChannel, O::Symmetric, O::Observer])?;
        let mut q = LowBitQuantizer::default();
        if let Some(bits) = o.bits {
            q.activation_bits = bits;
        }
        // `bits` is the activations' only: `--bits 8` used to turn the default 4-bit weights
        // into 8-bit ones too, and `--bits 9` blamed `weight_bits`.
        if let Some(bits) = o.weight_bits {
            q.weight_bits = bits;
        }
        if let Some(per_channel) = o.per_channel {
            q.weight_per_channel = per_channel;
        }
        if let Some(symmetric) = o.symmetric {
            q.activation_symmetric = symmetric;
        }
        if let Some(observer) = o.observer {
            q.observer = observer;
        }
        q.validate().map_err(|e| ApiError::Setting(format!("platform `lowbit`: {e}")))?;
        Ok(Box::new(q))
    }
}

/// `fp8-e4m3` / `fp8-e5m2`: 8-bit floating point.
struct Fp8 {
    name: &'static str,
    format: Fp8Format,
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
}
