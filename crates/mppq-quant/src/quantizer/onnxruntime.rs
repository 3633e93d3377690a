//! The `default` platform's quantizer (ONNX Runtime QDQ): uint8 asymmetric per-tensor
//! activations, int8 symmetric per-channel weights (on the output-channel axis of Conv,
//! ConvTranspose, Gemm and MatMul weights), int32 biases derived as `s_in · s_w`.

use super::Quantizer;
use crate::error::Result;
use mppq_ir::quant::{OperationQuantConfig, QuantizationState, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};

#[derive(Clone, Debug)]
pub struct OnnxRuntimeQuantizer {
    pub activation_bits: u32,
    pub weight_bits: u32,
    pub observer: String,
}

impl Default for OnnxRuntimeQuantizer {
    fn default() -> Self {
        Self { activation_bits: 8, weight_bits: 8, observer: "minmax".into() }
    }
}

const TYPES: [&str; 17] = [
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Relu", "Clip", "LeakyRelu", "Sigmoid", "MaxPool",
    "AveragePool", "GlobalAveragePool", "Concat", "Resize", "Softmax",
];

/// Which input slots carry quantizable data (the rest are shapes, scales, bounds).
fn data_inputs(op_type: &str, count: usize) -> Vec<usize> {
    match op_type {
        "Conv" | "ConvTranspose" | "Gemm" => (0..count.min(2)).collect(),
        "Add" | "Sub" | "Mul" | "MatMul" | "Concat" => (0..count).collect(),
        _ => vec![0],
    }
}

/// The output-channel axis of a weight, if the slot is one.
fn weight_axis(op: &mppq_ir::Operation, slot: usize, rank: usize) -> Option<usize> {
    match (op.op_type.as_str(), slot) {
        ("Conv", 1) => Some(0),
        ("ConvTranspose", 1) => Some(1),
        ("Gemm", 1) => Some(if op.attr_int("transB", 0).unwrap_or(0) != 0 { 0 } else { 1 }),
        ("MatMul", 1) if rank >= 2 => Some(rank - 1),
        _ => None,
    }
}

impl OnnxRuntimeQuantizer {
    fn activation(&self) -> Result<TensorQuantConfig> {
        let mut c = TensorQuantConfig::linear(self.activation_bits, false, None)?;
        c.observer = self.observer.clone();
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
        TYPES.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> Result<OperationQuantConfig> {
        let op = graph.operation(id)?;
        let data = data_inputs(&op.op_type, op.inputs().len());
        let mut inputs = Vec::with_capacity(op.inputs().len());
        for (slot, var) in op.inputs().iter().enumerate() {
            let Some(var) = var else {
                inputs.push(None);
                continue;
            };
            let v = graph.variable(*var)?;
            let float_param = v.value.as_ref().is_some_and(|t| t.dtype().is_float());
            let int_param = v.value.as_ref().is_some_and(|t| !t.dtype().is_float());
            let is_bias = matches!(op.op_type.as_str(), "Conv" | "ConvTranspose" | "Gemm") && slot == 2 && float_param;
            let config = if is_bias {
                // Derived from the input and weight scales after calibration.
                let mut c = TensorQuantConfig::linear(32, true, Some(0))?;
                c.state = QuantizationState::PassiveInit;
                c.observer = "passive".into();
                Some(c)
            } else if !data.contains(&slot) || int_param {
                None
            } else if let Some(axis) = v.value.as_ref().filter(|_| float_param).and_then(|t| weight_axis(op, slot, t.rank())) {
                let mut c = TensorQuantConfig::linear(self.weight_bits, true, Some(axis))?;
                c.observer = "minmax".into();
                Some(c)
            } else {
                Some(self.activation()?)
            };
            inputs.push(config);
        }
        let outputs = op
            .outputs()
            .iter()
            .enumerate()
            .map(|(i, o)| if i == 0 && o.is_some() { self.activation().map(Some) } else { Ok(None) })
            .collect::<Result<Vec<_>>>()?;
        Ok(OperationQuantConfig { input_configs: inputs, output_configs: outputs })
    }
}
