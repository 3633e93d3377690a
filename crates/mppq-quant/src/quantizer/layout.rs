//! What each input slot of a quantizable operation holds (activation, weight with its
//! output-channel axis, bias, or nothing to quantize), shared by the built-in quantizers so each
//! one only says how a slot of each kind is quantized.

use crate::error::Result;
use mppq_ir::quant::{OperationQuantConfig, TensorQuantConfig};
use mppq_ir::{Graph, InputRole, OpId, op_roles};

/// Operation types the built-in integer and FP8 quantizers configure ([`super::op_types::COMMON`]).
pub use super::op_types::COMMON as COMMON_TYPES;

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

/// The kind of input `slot` of operation `id`: its role in the operator-role table
/// ([`mppq_ir::roles`]) applied to what the slot reads. A weight slot reading a float parameter is
/// a weight (an activation when it has no channel axis, e.g. a rank-1 MatMul operand), read at
/// run time it is an activation; a bias slot is a bias only when it reads a float parameter;
/// integer parameters, float parameters such as Clip's bounds, shapes and indices are skipped.
pub fn input_kind(graph: &Graph, id: OpId, slot: usize) -> Result<SlotKind> {
    let op = graph.operation(id)?;
    let Some(Some(var)) = op.inputs().get(slot) else { return Ok(SlotKind::Skip) };
    let value = graph.variable(*var)?.value.as_ref();
    let float_param = value.filter(|t| t.dtype().is_float());
    if value.is_some() && float_param.is_none() {
        return Ok(SlotKind::Skip);
    }
    Ok(match (op_roles(op).input(slot), float_param) {
        (InputRole::Bias, Some(_)) => SlotKind::Bias,
        (InputRole::Weight { axis, .. }, Some(t)) => match axis.resolve(t.rank()) {
            Some(axis) => SlotKind::Weight { axis: Some(axis) },
            None => SlotKind::Activation,
        },
        (InputRole::Data | InputRole::Weight { .. }, _) => SlotKind::Activation,
        (InputRole::Bias | InputRole::Parameter | InputRole::ShapeOrIndex, _) => SlotKind::Skip,
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

/// Applies `adjust` to every weight config of operation `id` (its input slots of kind
/// [`SlotKind::Weight`]): how a quantizer that wraps another one changes only the weights.
pub fn adjust_weights(
    graph: &Graph,
    id: OpId,
    config: &mut OperationQuantConfig,
    mut adjust: impl FnMut(&mut TensorQuantConfig),
) -> Result<()> {
    for (slot, c) in config.input_configs.iter_mut().enumerate() {
        if let Some(c) = c
            && matches!(input_kind(graph, id, slot)?, SlotKind::Weight { .. })
        {
            adjust(c);
        }
    }
    Ok(())
}

/// A 32-bit symmetric per-channel bias config waiting for its input and weight scales.
pub fn passive_bias() -> Result<TensorQuantConfig> {
    let mut c = TensorQuantConfig::linear(32, true, Some(0))?;
    c.state = mppq_ir::quant::QuantizationState::PassiveInit;
    c.observer = mppq_ir::quant::ObserverKind::Passive;
    Ok(c)
}
