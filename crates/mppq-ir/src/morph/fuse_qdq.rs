//! Fuses QDQ convolutions into `QLinearConv`, as ONNX Runtime's graph optimiser does, so that an
//! executor running an exported QDQ model computes what the runtime computes (exact integer
//! accumulation, one requantization) rather than float math between Q/DQ pairs:
//!
//! ```text
//! DequantizeLinear(x) → Conv(·, DequantizeLinear(w), DequantizeLinear(b)) [→ Relu] → QuantizeLinear
//!   ⇒ QLinearConv(x_q, s_x, z_x, w_q, s_w, z_w, s_y, z_y, b_q)
//! ```
//!
//! A Relu between the Conv and the Q is dropped when the Q's zero point is its type's minimum:
//! the requantization clamp then does exactly what the Relu did. Anything else (float outputs,
//! a Conv output read by several operations, non-constant weights, a per-channel activation
//! scale) is left as it is.

use crate::attribute::Attribute;
use crate::dtype::DataType;
use crate::error::Result;
use crate::graph::{Graph, OpId, Operation, VarId};

/// Fuses every eligible Conv; returns how many. Q/DQ operations left without readers are removed.
pub fn fuse_qdq_conv(graph: &mut Graph) -> Result<usize> {
    let convs: Vec<OpId> =
        graph.operations().filter(|(_, op)| op.op_type == "Conv" && op.domain.is_empty()).map(|(id, _)| id).collect();
    let mut fused = 0;
    for conv in convs {
        if let Some(plan) = plan(graph, conv) {
            apply(graph, conv, plan)?;
            fused += 1;
        }
    }
    if fused > 0 {
        graph.remove_dead_code();
    }
    Ok(fused)
}

struct Plan {
    x: [Option<VarId>; 3],
    w: [Option<VarId>; 3],
    bias: Option<VarId>,
    y_scale: VarId,
    y_zero: VarId,
    output: VarId,
    /// Operations replaced by the QLinearConv besides the Conv: the Q and maybe a Relu.
    replaced: Vec<OpId>,
}

fn constant(graph: &Graph, var: Option<VarId>) -> Option<&crate::TensorData> {
    graph.variable(var?).ok()?.value.as_ref()
}

/// The inputs of the DequantizeLinear producing `var`, if one does (and its `axis`).
fn dequantized(graph: &Graph, var: VarId) -> Option<([Option<VarId>; 3], i64)> {
    let op = graph.operation(graph.producer(var)?).ok()?;
    if op.op_type != "DequantizeLinear" || !op.domain.is_empty() {
        return None;
    }
    let input = |i: usize| op.inputs().get(i).copied().flatten();
    let axis = match op.attributes.get("axis") {
        Some(Attribute::Int(a)) => *a,
        _ => 1,
    };
    Some(([input(0), input(1), input(2)], axis))
}

fn eight_bit(dtype: DataType) -> bool {
    matches!(dtype, DataType::Uint8 | DataType::Int8)
}

fn plan(graph: &Graph, conv: OpId) -> Option<Plan> {
    let op = graph.operation(conv).ok()?;
    let input = |i: usize| op.inputs().get(i).copied().flatten();
    // Activation: per-tensor 8-bit with a constant zero point (its dtype is the code type).
    let (x, _) = dequantized(graph, input(0)?)?;
    if constant(graph, x[1])?.len() != 1 || !eight_bit(constant(graph, x[2])?.dtype()) {
        return None;
    }
    // Weight: an 8-bit constant, per output channel (axis 0) or per tensor.
    let (w, axis) = dequantized(graph, input(1)?)?;
    let (w_q, w_scale) = (constant(graph, w[0])?, constant(graph, w[1])?);
    if !eight_bit(w_q.dtype()) || (w_scale.len() != 1 && axis != 0) {
        return None;
    }
    // Bias: an int32 constant, if any.
    let bias = match input(2) {
        None => None,
        Some(b) => {
            let (b, _) = dequantized(graph, b)?;
            if constant(graph, b[0])?.dtype() != DataType::Int32 {
                return None;
            }
            b[0]
        }
    };
    // Output: read only by a Q (through a Relu the clamp can replace), never a graph output.
    let mut replaced = Vec::new();
    let mut y = op.outputs().first().copied().flatten()?;
    let mut relu = None;
    let captured = graph.names_read_by_subgraphs();
    loop {
        if graph.outputs().contains(&y) || graph.consumers(y).len() != 1 || captured.contains(graph.var_name(y)) {
            return None;
        }
        let next = graph.consumers(y)[0];
        let reader = graph.operation(next).ok()?;
        match reader.op_type.as_str() {
            "Relu" if relu.is_none() => {
                relu = Some(next);
                replaced.push(next);
                y = reader.outputs().first().copied().flatten()?;
            }
            "QuantizeLinear" => {
                replaced.push(next);
                let q_input = |i: usize| reader.inputs().get(i).copied().flatten();
                let (y_scale, y_zero) = (q_input(1)?, q_input(2)?);
                let zero = constant(graph, Some(y_zero))?;
                if constant(graph, Some(y_scale))?.len() != 1 || !eight_bit(zero.dtype()) || zero.len() != 1 {
                    return None;
                }
                if relu.is_some() {
                    let at_type_min = match zero.dtype() {
                        DataType::Uint8 => zero.to_vec::<u8>().ok()?.first() == Some(&u8::MIN),
                        _ => zero.to_vec::<i8>().ok()?.first() == Some(&i8::MIN),
                    };
                    if !at_type_min {
                        return None;
                    }
                }
                let output = reader.outputs().first().copied().flatten()?;
                return Some(Plan { x, w, bias, y_scale, y_zero, output, replaced });
            }
            _ => return None,
        }
    }
}

fn apply(graph: &mut Graph, conv: OpId, plan: Plan) -> Result<()> {
    for op in &plan.replaced {
        graph.remove_operation(*op)?;
    }
    let removed = graph.remove_operation(conv)?;
    let mut fused = Operation::new("QLinearConv", removed.name.clone());
    fused.attributes = removed.attributes.clone();
    fused.opset = removed.opset;
    let inputs = [
        plan.x[0],
        plan.x[1],
        plan.x[2],
        plan.w[0],
        plan.w[1],
        plan.w[2],
        Some(plan.y_scale),
        Some(plan.y_zero),
        plan.bias,
    ];
    let inputs: Vec<Option<VarId>> = if plan.bias.is_some() { inputs.to_vec() } else { inputs[..8].to_vec() };
    graph.add_operation(fused, &inputs, &[Some(plan.output)])?;
    Ok(())
}
