//! `fp8-e4m3` / `fp8-e5m2`: floating-point 8-bit quantization (symmetric, scale searched by
//! the `floating` observer), per-tensor activations and per-channel weights. Biases stay in
//! float: FP8 runtimes add them in higher precision.

use super::Quantizer;
use super::layout::{COMMON_TYPES, SlotKind, configure};
use crate::error::Result;
use mppq_ir::quant::{
    ObserverKind, OperationQuantConfig, QuantizationPolicy, QuantizationProperty as P, TargetPrecision,
    TensorQuantConfig,
};
use mppq_ir::{Graph, OpId};

/// Which FP8 format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// 4 exponent, 3 mantissa bits, finite only (max 448).
    E4M3,
    /// 5 exponent, 2 mantissa bits, with infinities (max 57344).
    E5M2,
}

impl Fp8Format {
    /// (exponent bits, mantissa bits, largest finite value).
    pub fn layout(self) -> (u32, u32, i64) {
        match self {
            Self::E4M3 => (4, 3, 448),
            Self::E5M2 => (5, 2, 57344),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Fp8Quantizer {
    pub format: Fp8Format,
}

impl Fp8Quantizer {
    pub fn new(format: Fp8Format) -> Self {
        Self { format }
    }

    /// A floating config of this format (per-channel along `axis` when given).
    pub fn config(&self, axis: Option<usize>) -> Result<TensorQuantConfig> {
        let (e, m, max) = self.format.layout();
        let mut c = TensorQuantConfig::linear(8, true, axis)?;
        let granularity = if axis.is_some() { P::PerChannel } else { P::PerTensor };
        c.policy = QuantizationPolicy::new(&[granularity, P::Floating, P::Symmetric])?;
        c.exponent_bits = e;
        c.mantissa_bits = m;
        c.quant_min = -max;
        c.quant_max = max;
        c.observer = ObserverKind::Floating;
        Ok(c)
    }
}

impl Quantizer for Fp8Quantizer {
    fn name(&self) -> &str {
        match self.format {
            Fp8Format::E4M3 => "fp8-e4m3",
            Fp8Format::E5M2 => "fp8-e5m2",
        }
    }

    fn target_precision(&self) -> TargetPrecision {
        match self.format {
            Fp8Format::E4M3 => TargetPrecision::Fp8E4M3,
            Fp8Format::E5M2 => TargetPrecision::Fp8E5M2,
        }
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        COMMON_TYPES.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        configure(graph, id, |kind| {
            Ok(match kind {
                SlotKind::Activation => Some(self.config(None)?),
                SlotKind::Weight { axis } => Some(self.config(axis)?),
                SlotKind::Bias | SlotKind::Skip => None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_valid_floating_formats() {
        for (format, max) in [(Fp8Format::E4M3, 448), (Fp8Format::E5M2, 57344)] {
            let q = Fp8Quantizer::new(format);
            let c = q.config(Some(0)).unwrap();
            c.validate().unwrap();
            assert!(c.policy.is_floating() && c.policy.is_per_channel());
            assert_eq!((c.quant_min, c.quant_max), (-max, max));
            assert!(!q.config(None).unwrap().policy.is_per_channel());
        }
    }
}
