//! What each input slot of a quantizable operation holds (activation, weight with its
//! output-channel axis, bias, or nothing to quantize), shared by the built-in quantizers so each
//! one only says how a slot of each kind is quantized.

use crate::error::Result;
use mppq_ir::quant::{OperationQuantConfig, TensorQuantConfig};
use mppq_ir::{Graph, OpId, Operation};

/// Operation types the built-in integer and FP8 quantizers configure.
pub const COMMON_TYPES: [&str; 17] = [
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Relu",
    "Clip",
    "LeakyRelu",
    "Sigmoid",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Concat",
    "Resize",
    "Softmax",
];

/// The role of one input or output slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// A value computed at run time (or a float constant read like one, e.g. Add's operand).
    Activation,
    /// A float weight, with the axis of its output channels when it has one.
    Weight { axis: Option<usize> },
    /// A float bias of Conv/ConvTranspose/Gemm (derived as `s_in · s_w` after calibration).
    Bias,
    /// Shapes, bounds, integer tensors: never quantized.
    Skip,
}

/// Which input slots carry quantizable data (the rest are shapes, scales, bounds).
fn data_inputs(op_type: &str, count: usize) -> Vec<usize> {
    match op_type {
        "Conv" | "ConvTranspose" | "Gemm" => (0..count.min(2)).collect(),
        "Add" | "Sub" | "Mul" | "MatMul" | "Concat" => (0..count).collect(),
        _ => vec![0],
    }
}

/// The output-channel axis of a weight, if the slot is one.
fn weight_axis(op: &Operation, slot: usize, rank: usize) -> Option<usize> {
    match (op.op_type.as_str(), slot) {
        ("Conv", 1) => Some(0),
        ("ConvTranspose", 1) => Some(1),
        ("Gemm", 1) => Some(if op.attr_int("transB", 0).unwrap_or(0) != 0 { 0 } else { 1 }),
        ("MatMul", 1) if rank >= 2 => Some(rank - 1),
        _ => None,
    }
}

/// The kind of input `slot` of operation `id`.
pub fn input_kind(graph: &Graph, id: OpId, slot: usize) -> Result<SlotKind> {
    let op = graph.operation(id)?;
    let Some(Some(var)) = op.inputs().get(slot) else { return Ok(SlotKind::Skip) };
    let value = graph.variable(*var)?.value.as_ref();
    let float_param = value.is_some_and(|t| t.dtype().is_float());
    let int_param = value.is_some_and(|t| !t.dtype().is_float());
    let computing = matches!(op.op_type.as_str(), "Conv" | "ConvTranspose" | "Gemm");
    Ok(if computing && slot == 2 && float_param {
        SlotKind::Bias
    } else if !data_inputs(&op.op_type, op.inputs().len()).contains(&slot) || int_param {
        SlotKind::Skip
    } else if let Some(t) = value.filter(|_| float_param) {
        match weight_axis(op, slot, t.rank()) {
            Some(axis) => SlotKind::Weight { axis: Some(axis) },
            None => SlotKind::Activation,
        }
    } else {
        SlotKind::Activation
    })
}

/// Builds the configs of operation `id`: each input by its kind, output 0 as an activation,
/// other outputs unquantized. `config_for` says how a slot of each kind is quantized.
pub fn configure(
    graph: &Graph,
    id: OpId,
    config_for: impl Fn(SlotKind) -> Result<Option<TensorQuantConfig>>,
) -> Result<OperationQuantConfig> {
    let op = graph.operation(id)?;
    let input_configs =
        (0..op.inputs().len()).map(|slot| config_for(input_kind(graph, id, slot)?)).collect::<Result<Vec<_>>>()?;
    let output_configs = op
        .outputs()
        .iter()
        .enumerate()
        .map(|(i, o)| if i == 0 && o.is_some() { config_for(SlotKind::Activation) } else { Ok(None) })
        .collect::<Result<Vec<_>>>()?;
    Ok(OperationQuantConfig { input_configs, output_configs })
}

/// A 32-bit symmetric per-channel bias config waiting for its input and weight scales.
pub fn passive_bias() -> Result<TensorQuantConfig> {
    let mut c = TensorQuantConfig::linear(32, true, Some(0))?;
    c.state = mppq_ir::quant::QuantizationState::PassiveInit;
    c.observer = "passive".into();
    Ok(c)
}
