//! `trt-int8` (TensorRT-style): int8 symmetric per-tensor activations, int8 symmetric
//! per-channel weights, int32 biases derived as `s_in · s_w`.

use super::Quantizer;
use super::layout::{COMMON_TYPES, SlotKind, configure, passive_bias};
use crate::error::Result;
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};

#[derive(Clone, Debug)]
pub struct TensorRtQuantizer {
    /// Observer of activations (weights always use `minmax`).
    pub observer: ObserverKind,
}

impl Default for TensorRtQuantizer {
    fn default() -> Self {
        Self { observer: ObserverKind::Minmax }
    }
}

impl Quantizer for TensorRtQuantizer {
    fn name(&self) -> &str {
        "trt-int8"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        COMMON_TYPES.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        configure(graph, id, |kind| {
            Ok(match kind {
                SlotKind::Activation => {
                    let mut c = TensorQuantConfig::linear(8, true, None)?;
                    c.observer = self.observer;
                    Some(c)
                }
                SlotKind::Weight { axis } => Some(TensorQuantConfig::linear(8, true, axis)?),
                SlotKind::Bias => Some(passive_bias()?),
                SlotKind::Skip => None,
            })
        })
    }
}
