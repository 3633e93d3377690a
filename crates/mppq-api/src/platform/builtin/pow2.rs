//! `pow2-int8`: int8 with power-of-two scales, for fixed-point accelerators that shift instead of
//! multiply (Xilinx/AMD Vitis AI's DPU, NXP's and most DSP toolchains in PPQ's list): symmetric
//! per-tensor activations and weights, each scale `2^k` with `k = ceil(log2(absmax / 127))` — the
//! DPU's `fix_pos = floor(log2(127 / absmax))` — so the largest value is never clipped; biases
//! 32-bit from `s_in · s_w`, a power of two as well. Written as a user's crate would write a
//! platform: its own [`Quantizer`] over the role-table slot kinds, and a [`Platform`].

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{
    ObserverKind, OperationQuantConfig, QuantizationPolicy, QuantizationProperty, TargetPrecision, TensorQuantConfig,
};
use mppq_ir::{Graph, OpId};
use mppq_quant::quantizer::Quantizer;
use mppq_quant::quantizer::layout::{COMMON_TYPES, SlotKind, configure, passive_bias};

pub(crate) struct Pow2;

impl Platform for Pow2 {
    fn name(&self) -> &str {
        "pow2-int8"
    }
    fn description(&self) -> &str {
        "int8 with power-of-two scales (fixed-point accelerators such as Vitis AI's DPU): symmetric per-tensor activations and weights"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        Ok(Box::new(Pow2Quantizer { observer: o.observer.unwrap_or(ObserverKind::Minmax) }))
    }
}

struct Pow2Quantizer {
    observer: ObserverKind,
}

/// Symmetric per-tensor int8 whose scale observers round up to a power of two.
fn pow2_config() -> mppq_quant::Result<TensorQuantConfig> {
    use QuantizationProperty::*;
    let mut c = TensorQuantConfig::linear(8, true, None)?;
    c.policy = QuantizationPolicy::new(&[PerTensor, Linear, Symmetric, PowerOf2])?;
    Ok(c)
}

impl Quantizer for Pow2Quantizer {
    fn name(&self) -> &str {
        "pow2-int8"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        COMMON_TYPES.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        configure(graph, id, |kind| {
            Ok(match kind {
                SlotKind::Activation => {
                    let mut c = pow2_config()?;
                    c.observer = self.observer;
                    Some(c)
                }
                SlotKind::Weight { .. } => Some(pow2_config()?),
                SlotKind::Bias => {
                    let mut c = passive_bias()?;
                    c.channel_axis = None;
                    c.policy = QuantizationPolicy::linear(true, false);
                    Some(c)
                }
                SlotKind::Skip => None,
            })
        })
    }
}
