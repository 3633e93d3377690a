//! The `default` platform's quantizer (ONNX Runtime QDQ): uint8 asymmetric per-tensor
//! activations, int8 symmetric per-channel weights (on the output-channel axis of Conv,
//! ConvTranspose, Gemm and MatMul weights), int32 biases derived as `s_in · s_w`.
//!
//! On x86 CPUs without VNNI (AVX2, or AVX-512 without VNNI), ORT's fused u8×s8 kernels multiply
//! with `vpmaddubsw`, which saturates the int16 sum of two products (255·127·2 > 32767): unlimited
//! 8-bit weights lost 3–25 dB in ORT there against the simulation. The `target_cpu` decides
//! ([`TargetCpu`]): 8-bit weights of Conv/MatMul/Gemm get the x86 pair limit (no same-sign pair
//! of neighbouring codes above 128 in magnitude) for `any` (the default: a weight with a pair
//! over it becomes uint8 with zero point 128 at calibration, the others stay int8, so every
//! class computes the full-range numbers exactly) and `x86-avx2` (int8 within the limit); for
//! `x86-vnni` and `arm64` they keep the full int8 range. `weight_bits = 7` is ORT's `reduce_range` (the platform's option): every
//! pair fits then, at half the resolution everywhere. What stays float and why (Softmax
//! probabilities, constant operands of Add/Sub/Mul) is explained at the helpers below.
use super::Quantizer;
use super::layout::{SlotKind, configure, input_kind, passive_bias};
use super::target_cpu::{TargetCpu, x86_pair_limit};
use crate::error::Result;
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};

#[derive(Clone, Debug)]
pub struct OnnxRuntimeQuantizer {
    pub activation_bits: u32,
    pub weight_bits: u32,
    /// Activations as int8 with a zero point (`[-128, 127]`) instead of uint8 (`[0, 255]`).
    pub activation_signed: bool,
    pub observer: ObserverKind,
    /// The CPU class whose integer arithmetic the weights must fit (the `default` platform sets
    /// it; `None`, the scheme alone, for platforms that wrap this quantizer for other runtimes).
    pub target_cpu: Option<TargetCpu>,
}

impl Default for OnnxRuntimeQuantizer {
    fn default() -> Self {
        Self {
            activation_bits: 8,
            weight_bits: 8,
            activation_signed: false,
            observer: ObserverKind::Minmax,
            target_cpu: None,
        }
    }
}

/// Whether `var` is a Softmax output. ORT fuses `DQ → Softmax → Q` into QLinearSoftmax, whose
/// lookup-table exponential differs from float softmax + Q by one step on ~5 % of the
/// probabilities (measured on tiny_transformer, growing to 6 steps at the output), so the
/// probabilities stay float: no Q follows the Softmax and ORT runs it, and its consumer, in float.
fn from_softmax(graph: &Graph, var: mppq_ir::VarId) -> bool {
    graph.producer(var).and_then(|p| graph.operation(p).ok()).is_some_and(|op| op.op_type == "Softmax")
}

/// A constant operand of an element-wise Add/Sub/Mul (a MatMul's bias, an attention scale)
/// stays float: quantized, ORT fuses the op into QLinearAdd/QLinearMul, whose fixed-point
/// requantization rounds differently from float-add-then-Q on ~0.1 % of values; those one-step
/// flips then grow through attention and MLP (measured: 97.4 % agreement on tiny_transformer).
/// Float, ORT adds in float between DQ and Q: exactly what the simulation computes, and the
/// constant keeps full precision.
fn elementwise_constant(op: &mppq_ir::Operation, float_param: bool) -> bool {
    float_param && matches!(op.op_type.as_str(), "Add" | "Sub" | "Mul")
}

/// Recurrent cells (LSTM, GRU, RNN) get their weights W and R quantized (int8, per row of
/// gates on axis 1) and nothing else: ONNX Runtime has no QDQ recurrent kernel, so it runs the
/// float cell on the dequantized weights. Q/DQ on the sequence, the states or the bias would only
/// add rounding (and ORT's static quantizer leaves these cells float altogether; its dynamic
/// quantizer quantizes the same two weights).
fn recurrent(op: &mppq_ir::Operation) -> bool {
    matches!(op.op_type.as_str(), "LSTM" | "GRU" | "RNN") && op.in_default_domain()
}

impl OnnxRuntimeQuantizer {
    /// The x86 pair limit of a weight config, when the target may saturate and two codes of
    /// the config's range can exceed it (7-bit weights never can).
    fn pair_limit(&self, graph: &Graph, id: OpId, c: &TensorQuantConfig) -> Option<mppq_ir::quant::PairLimit> {
        let widest = c.quant_min.abs().max(c.quant_max.abs());
        if !self.target_cpu.is_some_and(TargetCpu::may_saturate)
            || 2 * widest <= mppq_ir::quant::pair_limit::X86_PAIR_LIMIT
        {
            return None;
        }
        let weight = graph.operation(id).ok()?.inputs().get(1).copied().flatten()?;
        let mut limit = x86_pair_limit(graph, id, graph.variable(weight).ok()?.value.as_ref()?.shape())?;
        // `any`: exact everywhere at full resolution (uint8 where a pair exceeds the limit);
        // `x86-avx2`: the limit always, for the u8×s8 kernels' speed there.
        limit.unsigned_when_over = self.target_cpu == Some(TargetCpu::Any);
        Some(limit)
    }

    fn activation(&self) -> Result<TensorQuantConfig> {
        let mut c = TensorQuantConfig::linear(self.activation_bits, false, None)?;
        if self.activation_signed {
            c.quant_min -= 1 << (self.activation_bits - 1);
            c.quant_max -= 1 << (self.activation_bits - 1);
        }
        c.observer = self.observer;
        Ok(c)
    }
}

impl Quantizer for OnnxRuntimeQuantizer {
    fn name(&self) -> &str {
        "default"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        super::op_types::ONNX_RUNTIME.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        let mut config = configure(graph, id, |kind| match kind {
            SlotKind::Activation => self.activation().map(Some),
            SlotKind::Weight { axis } => {
                let mut c = TensorQuantConfig::linear(self.weight_bits, true, axis)?;
                c.observer = ObserverKind::Minmax;
                c.pair_limit = self.pair_limit(graph, id, &c);
                Ok(Some(c))
            }
            SlotKind::Bias => passive_bias().map(Some),
            SlotKind::Skip => Ok(None),
        })?;
        // What ORT's fused kernels would compute differently stays float (see the helpers above).
        let op = graph.operation(id)?;
        if recurrent(op) {
            for (slot, c) in config.input_configs.iter_mut().enumerate() {
                if !matches!(input_kind(graph, id, slot)?, SlotKind::Weight { .. }) {
                    *c = None;
                }
            }
            config.output_configs.iter_mut().for_each(|c| *c = None);
            return Ok(config);
        }
        for (slot, var) in op.inputs().iter().enumerate() {
            let Some(var) = var else { continue };
            let float_param = graph.variable(*var)?.value.as_ref().is_some_and(|t| t.dtype().is_float());
            if from_softmax(graph, *var) || elementwise_constant(op, float_param) {
                config.input_configs[slot] = None;
            }
        }
        Ok(config)
    }
}
