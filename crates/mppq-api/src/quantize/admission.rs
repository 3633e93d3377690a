//! Admission: what is refused before any work, each naming the file and what would fix it —
//! a model newer than this build, without outputs or opset, already quantized, with weights that
//! are not finite, or an `--ignore` item that matches nothing.

use crate::error::{ApiError, Result};
use mppq_dispatch::IgnoredScope;
use mppq_ir::Model;
use std::path::Path;

/// Initializers must not hold NaN, weights and biases must be finite, BatchNormalization
/// variances non-negative: each fault used to surface as an observer that "observed NaN",
/// blaming the calibration data.
pub(crate) fn check_weights(path: &Path, model: &Model) -> Result<()> {
    let g = &model.graph;
    let user = |var| {
        g.consumers(var)
            .first()
            .and_then(|op| g.operation(*op).ok())
            .map(|op| format!(" (read by {} `{}`)", op.op_type, op.name))
            .unwrap_or_default()
    };
    // Infinity is a legitimate constant (Clip bounds, attention masks), but not as a weight or bias.
    let weighs = |var| {
        g.consumers(var).iter().filter_map(|op| g.operation(*op).ok()).any(|op| {
            let roles = mppq_ir::op_roles(op);
            let slots = roles.weight_slots().map(|(slot, ..)| slot).chain(roles.bias());
            slots.into_iter().any(|slot| op.inputs().get(slot).copied().flatten() == Some(var))
        })
    };
    for (id, var) in g.initializers() {
        let Some(value) = var.value.as_ref().filter(|v| v.dtype().is_float()) else { continue };
        let Ok(values) = value.to_f32_vec() else { continue };
        let bad = values
            .iter()
            .position(|v| v.is_nan())
            .or_else(|| values.iter().position(|v| v.is_infinite()).filter(|_| weighs(id)));
        if let Some(i) = bad {
            return Err(ApiError::data(
                path,
                format!(
                    "initializer `{}`{} holds {} at flat index {i}: the model's weights must be finite numbers",
                    var.name,
                    user(id),
                    values[i]
                ),
            ));
        }
    }
    for (_, op) in g.operations().filter(|(_, op)| op.op_type == "BatchNormalization") {
        let Some(var) = op.inputs().get(4).copied().flatten() else { continue };
        let Some(Ok(values)) = g.variable(var).ok().and_then(|v| v.value.as_ref()).map(|v| v.to_f32_vec()) else {
            continue;
        };
        if let Some(c) = values.iter().position(|v| *v < 0.0) {
            return Err(ApiError::data(
                path,
                format!(
                    "BatchNormalization `{}` has variance {} at channel {c}: a variance cannot be negative (the \
                     model's weights are damaged)",
                    op.name, values[c]
                ),
            ));
        }
    }
    Ok(())
}

/// Operators of an already quantized model (QDQ or QOperator format).
const QUANTIZED_OPS: &[&str] = &[
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeLinear",
];

/// Quantizing a quantized model again would stack a second rounding on the first (it used to
/// happen without a word): refused, naming what was found.
pub(crate) fn check_not_quantized(path: &Path, model: &Model) -> Result<()> {
    let found: Vec<&str> = model
        .graph
        .operations()
        .filter(|(_, op)| QUANTIZED_OPS.contains(&op.op_type.as_str()))
        .map(|(_, op)| op.op_type.as_str())
        .collect();
    if let Some(first) = found.first() {
        return Err(ApiError::data(
            path,
            format!(
                "is already quantized ({} quantization operators, e.g. {first}): give mppq the float model \
                 (`mppq run` runs this one as it is)",
                found.len()
            ),
        ));
    }
    Ok(())
}

/// Refuses what no quantization can be right for, before any work: a model from an ONNX newer
/// than this build knows (its operators may mean what this build cannot tell, and the export
/// would carry versions no runtime accepts: opset 99 used to be written back as 99), one that
/// declares no opset for its ONNX operators (it used to be read as opset 1 and "converted"),
/// and one without outputs (calibration then blamed an observer that saw nothing).
pub fn check_model(path: &Path, model: &Model) -> Result<()> {
    let (max_ir, max_opset) = (mppq_onnx::MAX_IR_VERSION, mppq_onnx::MAX_OPSET);
    if model.ir_version > max_ir {
        return Err(ApiError::data(
            path,
            format!(
                "IR version {} is newer than this build knows (≤ {max_ir}, ONNX 1.21): save the model with ONNX ≤ 1.21",
                model.ir_version
            ),
        ));
    }
    let uses_onnx_ops = model.graph.operations().any(|(_, op)| matches!(op.domain.as_str(), "" | "ai.onnx"));
    if uses_onnx_ops && model.opset("").is_none() {
        return Err(ApiError::data(
            path,
            "declares no opset for the ONNX domain (its opset_import lists none), so what its operators \
             mean is unknown: re-export it, or add the opset it was written for (onnx: \
             model.opset_import.append(onnx.helper.make_opsetid(\"\", N)))",
        ));
    }
    if model.graph.outputs().is_empty() {
        return Err(ApiError::data(path, "the graph has no outputs: there is nothing to compute or quantize"));
    }
    if let Some(opset) = model.opset("")
        && opset > max_opset
    {
        return Err(ApiError::data(
            path,
            format!(
                "opset {opset} is newer than this build knows (≤ {max_opset}): export the model at opset ≤ {max_opset}"
            ),
        ));
    }
    Ok(())
}

/// Every `--ignore` item must match an operation type or name of the model (or of a sub-graph):
/// a typo used to quantize everything without a word. The same rule decides what is ignored
/// ([`IgnoredScope::item_matches`]).
pub(crate) fn check_ignore_patterns(graph: &mppq_ir::Graph, items: &[String]) -> Result<()> {
    fn collect<'g>(g: &'g mppq_ir::Graph, out: &mut Vec<(&'g str, &'g str)>) {
        for (_, op) in g.operations() {
            out.push((op.op_type.as_str(), op.name.as_str()));
            for attr in op.attributes.values() {
                if let mppq_ir::Attribute::Graph(body) = attr {
                    collect(body, out);
                }
            }
        }
    }
    let mut ops = Vec::new();
    collect(graph, &mut ops);
    for item in items {
        if !ops.iter().any(|(t, n)| IgnoredScope::item_matches(item, t, n)) {
            let mut types: Vec<&str> = ops.iter().map(|(t, _)| *t).collect();
            types.sort_unstable();
            types.dedup();
            return Err(ApiError::Setting(format!(
                "ignore `{item}` matches no operation type or name of the model (`*` and `?` are the only \
                 wildcards; `mppq info` lists the names; types here: {})",
                types.join(", ")
            )));
        }
    }
    Ok(())
}

/// Turns the `--ignore` items into an ignored scope ([`IgnoredScope::from_items`]).
pub fn ignored_scope(items: &[String]) -> IgnoredScope {
    IgnoredScope::from_items(items)
}
