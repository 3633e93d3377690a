//! `weight-only`: block-wise INT4/INT8 weights of MatMul and Gemm, activations float (the way
//! transformers and LLMs are compressed for ONNX Runtime's `MatMulNBits`). A weight qualifies
//! when it is a 2-D float initializer read in the weight slot; its output channels and input
//! channels come from the operator-role table, the blocks run along the input channels.
//! Everything else — activations, biases, products of two activations — stays float.

use super::Quantizer;
use super::layout::{SlotKind, input_kind};
use super::op_types::WEIGHT_ONLY;
use crate::error::{QuantError, Result};
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, QuantBlock, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId, op_roles};

#[derive(Clone, Debug, PartialEq)]
pub struct WeightOnlyQuantizer {
    /// 2, 4 or 8 (what `MatMulNBits` stores).
    pub bits: u32,
    /// Elements per block along the input channels: a power of two of at least 16.
    pub block_size: usize,
    /// Signed codes without zero points (else unsigned codes with a zero point per block).
    pub symmetric: bool,
    /// How the blocks are calibrated: `minmax` (round to nearest, ONNX Runtime's) or `hqq`
    /// (refined float zero points; asymmetric only, symmetric blocks keep round to nearest). GPTQ
    /// then finds each block's parameters the same way.
    pub observer: ObserverKind,
}

impl Default for WeightOnlyQuantizer {
    /// ONNX Runtime's `matmul_nbits_quantizer` defaults (4 bits, blocks of 128, asymmetric), with
    /// HQQ's zero points: on all-MiniLM-L6-v2 at g32 they took GPTQ from 16.1 to 16.5 dB and the
    /// embeddings' nearest-neighbour agreement from 83.6 % to 85.2 % (`docs/weight-only.md`).
    fn default() -> Self {
        Self { bits: 4, block_size: 128, symmetric: false, observer: ObserverKind::Hqq }
    }
}

impl WeightOnlyQuantizer {
    /// Checks the bits and the block size against what `MatMulNBits` accepts.
    pub fn validate(&self) -> Result<()> {
        let bad = |setting: &'static str, value: String, expected: &str| {
            Err(QuantError::QuantizerSetting {
                quantizer: "weight-only".into(),
                setting,
                value,
                expected: expected.into(),
            })
        };
        if !matches!(self.bits, 2 | 4 | 8) {
            return bad("weight_bits", self.bits.to_string(), "use 2, 4 or 8 (what MatMulNBits stores)");
        }
        if !matches!(self.observer, ObserverKind::Minmax | ObserverKind::Hqq) {
            return bad("observer", self.observer.to_string(), "use minmax (round to nearest) or hqq");
        }
        if self.block_size < 16 || !self.block_size.is_power_of_two() {
            return bad(
                "block_size",
                self.block_size.to_string(),
                "use a power of two of at least 16 (32, 64, 128, …)",
            );
        }
        Ok(())
    }

    /// The block config of input `slot` of `id`, when it is a 2-D float weight.
    fn weight_config(&self, graph: &Graph, id: OpId, slot: usize) -> Result<Option<TensorQuantConfig>> {
        let SlotKind::Weight { axis: Some(out_axis) } = input_kind(graph, id, slot)? else { return Ok(None) };
        let op = graph.operation(id)?;
        let Some(Some(var)) = op.inputs().get(slot).copied() else { return Ok(None) };
        let rank = graph.variable(var)?.value.as_ref().map_or(0, |t| t.rank());
        let Some(in_axis) = op_roles(op).input_channel_axis(rank).filter(|_| rank == 2) else { return Ok(None) };
        let block = QuantBlock { axis: in_axis, size: self.block_size };
        let mut config = TensorQuantConfig::blocked(self.bits, self.symmetric, out_axis, block)?;
        config.observer = self.observer;
        Ok(Some(config))
    }
}

impl Quantizer for WeightOnlyQuantizer {
    fn name(&self) -> &str {
        "weight-only"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::WeightOnly
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        WEIGHT_ONLY.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        self.validate()?;
        let op = graph.operation(id)?;
        let input_configs =
            (0..op.inputs().len()).map(|slot| self.weight_config(graph, id, slot)).collect::<Result<_>>()?;
        Ok(OperationQuantConfig { input_configs, output_configs: vec![None; op.outputs().len()] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_matmul_nbits_cannot_store_are_refused() {
        let q = WeightOnlyQuantizer { bits: 3, ..Default::default() };
        assert!(q.validate().unwrap_err().to_string().contains("weight_bits = 3"));
        let q = WeightOnlyQuantizer { block_size: 48, ..Default::default() };
        assert!(q.validate().unwrap_err().to_string().contains("block_size = 48"));
        WeightOnlyQuantizer { bits: 8, block_size: 16, symmetric: true, ..Default::default() }.validate().unwrap();
    }
}
