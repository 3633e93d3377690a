//! `lowbit`: low-bit linear quantization with every choice open (2–8 bits, symmetry,
//! granularity).

use crate::error::{ApiError, Result};
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::{LowBitQuantizer, Quantizer};

/// `lowbit`: every choice open (2–8 bits, symmetry, granularity).
pub(crate) struct LowBit;

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
