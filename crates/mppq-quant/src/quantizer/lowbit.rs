//! `lowbit`: linear integer quantization with 2–8 bits for weights and activations, each
//! symmetric or not, weights per-channel or not (the seeds' low-bit extension). Biases are
//! int32, derived as `s_in · s_w`.

use super::Quantizer;
use super::layout::{COMMON_TYPES, SlotKind, configure, passive_bias};
use crate::error::{QuantError, Result};
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};

#[derive(Clone, Debug, PartialEq)]
pub struct LowBitQuantizer {
    pub weight_bits: u32,
    pub activation_bits: u32,
    pub weight_symmetric: bool,
    pub activation_symmetric: bool,
    /// One scale per output channel of each weight (else one per weight).
    pub weight_per_channel: bool,
    /// Observer of activations (weights always use `minmax`).
    pub observer: ObserverKind,
}

impl Default for LowBitQuantizer {
    /// 4-bit symmetric per-channel weights, 8-bit asymmetric activations.
    fn default() -> Self {
        Self {
            weight_bits: 4,
            activation_bits: 8,
            weight_symmetric: true,
            activation_symmetric: false,
            weight_per_channel: true,
            observer: ObserverKind::Minmax,
        }
    }
}

impl LowBitQuantizer {
    /// Checks the bit widths (2–8 each).
    pub fn validate(&self) -> Result<()> {
        for (what, bits) in [("weight_bits", self.weight_bits), ("activation_bits", self.activation_bits)] {
            if !(2..=8).contains(&bits) {
                return Err(QuantError::QuantizerSetting {
                    quantizer: "lowbit".into(),
                    setting: what,
                    value: bits.to_string(),
                    expected: "use 2–8 bits".into(),
                });
            }
        }
        Ok(())
    }
}

impl Quantizer for LowBitQuantizer {
    fn name(&self) -> &str {
        "lowbit"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::LowBit
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        COMMON_TYPES.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        self.validate()?;
        configure(graph, id, |kind| {
            Ok(match kind {
                SlotKind::Activation => {
                    let mut c = TensorQuantConfig::linear(self.activation_bits, self.activation_symmetric, None)?;
                    c.observer = self.observer;
                    Some(c)
                }
                SlotKind::Weight { axis } => {
                    let axis = axis.filter(|_| self.weight_per_channel);
                    Some(TensorQuantConfig::linear(self.weight_bits, self.weight_symmetric, axis)?)
                }
                SlotKind::Bias => Some(passive_bias()?),
                SlotKind::Skip => None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_outside_2_to_8_are_rejected() {
        let q = LowBitQuantizer { weight_bits: 9, ..Default::default() };
        assert!(q.validate().unwrap_err().to_string().contains("weight_bits = 9"));
        let q = LowBitQuantizer { activation_bits: 1, ..Default::default() };
        assert!(q.validate().unwrap_err().to_string().contains("activation_bits = 1"));
        LowBitQuantizer { weight_bits: 2, activation_bits: 8, ..Default::default() }.validate().unwrap();
    }
}
