//! `academic-int8`: the seeds' ACADEMIC_INT8, the loose scheme papers quantize with (PPQ's
//! platform tutorial): only the inputs of Conv, Gemm and ConvTranspose are quantized — the data
//! input uint8 asymmetric per-tensor (percentile observer), the weight int8 symmetric per-tensor
//! (min/max), the bias 30-bit symmetric from `s_in · s_w` — and every output stays FP32. It
//! matches no runtime; it reproduces published numbers. Written as a user's crate would write a
//! platform: its own [`Quantizer`] over the role-table slot kinds, and a [`Platform`].

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, QuantizationState, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};
use mppq_quant::quantizer::Quantizer;
use mppq_quant::quantizer::layout::{SlotKind, input_kind};

pub(crate) struct Academic;

impl Platform for Academic {
    fn name(&self) -> &str {
        "academic-int8"
    }
    fn description(&self) -> &str {
        "ACADEMIC_INT8 (papers): only Conv/Gemm/ConvTranspose inputs quantized, uint8 percentile activations, int8 per-tensor weights, 30-bit biases, FP32 outputs"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        Ok(Box::new(AcademicQuantizer { observer: o.observer.unwrap_or(ObserverKind::Percentile) }))
    }
}

/// Bits of the bias: 30, not 32, so `s_in · s_w` of tiny scales cannot overflow (PPQ's choice).
const BIAS_BITS: u32 = 30;

struct AcademicQuantizer {
    /// Observer of the data inputs (weights: min/max).
    observer: ObserverKind,
}

impl Quantizer for AcademicQuantizer {
    fn name(&self) -> &str {
        "academic-int8"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        mppq_quant::quantizer::op_types::ACADEMIC.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        let op = graph.operation(id)?;
        let mut input_configs = Vec::with_capacity(op.inputs().len());
        for slot in 0..op.inputs().len() {
            input_configs.push(match input_kind(graph, id, slot)? {
                SlotKind::Activation => {
                    let mut c = TensorQuantConfig::linear(8, false, None)?;
                    c.observer = self.observer;
                    Some(c)
                }
                SlotKind::Weight { .. } => Some(TensorQuantConfig::linear(8, true, None)?),
                SlotKind::Bias => {
                    let mut c = TensorQuantConfig::linear(32, true, None)?;
                    c.num_of_bits = BIAS_BITS;
                    (c.quant_min, c.quant_max) = (-(1 << (BIAS_BITS - 1)), (1 << (BIAS_BITS - 1)) - 1);
                    c.state = QuantizationState::PassiveInit;
                    c.observer = ObserverKind::Passive;
                    Some(c)
                }
                SlotKind::Skip => None,
            });
        }
        let output_configs = vec![None; op.outputs().len()];
        Ok(OperationQuantConfig { input_configs, output_configs })
    }
}
