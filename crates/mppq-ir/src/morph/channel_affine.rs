//! A Mul or Add by a per-output-channel (or scalar) constant right after a Conv, ConvTranspose
//! or Gemm is a BatchNormalization in another form: PaddlePaddle exports every conv bias as
//! `Conv → Add([1, C, 1, 1])` and MobileOne blocks scale with `Mul`. Left alone, each costs a
//! quantization step of its own (and keeps ONNX Runtime from fusing the conv with its bias).
//! This turns each such Mul/Add into the equivalent BatchNormalization (γ = the factor, β = the
//! addend, μ = 0, σ² = 1, ε = 0) for [`super::fold_batchnorm`] to fold into the weights.

use crate::attribute::Attribute;
use crate::dtype::DataType;
use crate::error::Result;
use crate::graph::{Graph, OpId, Operation, VarId};
use crate::tensor::TensorData;

/// Rewrites every foldable Mul/Add after a computing op as a BatchNormalization; returns how
/// many. Only pairs that [`super::fold_batchnorm`] will fold are rewritten: the computing op's
/// output has this one reader, its weight is a float initializer only it reads, its bias (if
/// any) a float initializer with one value per output channel.
pub fn channel_affine_to_batchnorm(graph: &mut Graph) -> Result<usize> {
    let captured = graph.names_read_by_subgraphs();
    let mut plans = Vec::new();
    for (id, op) in graph.operations() {
        if !matches!(op.op_type.as_str(), "Conv" | "ConvTranspose" | "Gemm") || !op.in_default_domain() {
            continue;
        }
        if let Some(plan) = plan(graph, id, &captured) {
            plans.push(plan);
        }
    }
    let rewritten = plans.len();
    for p in plans {
        let reader = graph.remove_operation(p.reader)?;
        let channels = p.factor.len();
        let tensor = |values: &[f32]| TensorData::from_vec(vec![channels], values);
        let base = format!("{}_as_bn", reader.name);
        let mut inputs = vec![Some(p.input)];
        for (what, values) in
            [("scale", p.factor), ("bias", p.addend), ("mean", vec![0.0; channels]), ("var", vec![1.0; channels])]
        {
            let name = graph.fresh_var_name(&format!("{base}.{what}"));
            inputs.push(Some(graph.add_initializer(name, tensor(&values)?)?));
        }
        let mut bn = Operation::new("BatchNormalization", graph.fresh_op_name(&base))
            .with_attr("epsilon", Attribute::Float(0.0))
            .with_opset(reader.opset);
        bn.domain = reader.domain.clone();
        graph.add_operation(bn, &inputs, &[Some(p.output)])?;
        if graph.consumers(p.constant).is_empty() && !graph.is_graph_output(p.constant) {
            graph.remove_variable(p.constant)?;
        }
    }
    Ok(rewritten)
}

struct Plan {
    reader: OpId,
    input: VarId,
    output: VarId,
    constant: VarId,
    factor: Vec<f32>,
    addend: Vec<f32>,
}

fn float_initializer(graph: &Graph, var: VarId) -> Option<&TensorData> {
    graph.variable(var).ok()?.value.as_ref().filter(|t| t.dtype() == DataType::Float)
}

fn plan(graph: &Graph, id: OpId, captured: &std::collections::HashSet<String>) -> Option<Plan> {
    let op = graph.operation(id).ok()?;
    let y = op.outputs().first().copied().flatten()?;
    if graph.is_graph_output(y) || captured.contains(graph.var_name(y)) || graph.consumers(y).len() != 1 {
        return None;
    }
    let reader_id = graph.consumers(y)[0];
    let reader = graph.operation(reader_id).ok()?;
    if !matches!(reader.op_type.as_str(), "Mul" | "Add") || !reader.in_default_domain() || reader.inputs().len() != 2 {
        return None;
    }
    let constant = reader.inputs().iter().flatten().copied().find(|v| *v != y)?;
    if reader.inputs().iter().flatten().filter(|v| **v == y).count() != 1 {
        return None;
    }
    let output = reader.outputs().first().copied().flatten()?;
    let c = float_initializer(graph, constant)?;

    // The weight must be one fold_batchnorm changes safely.
    let w = op.inputs().get(1).copied().flatten()?;
    let w_shape = float_initializer(graph, w)?.shape().to_vec();
    if graph.consumers(w).len() != 1 || w_shape.len() < 2 {
        return None;
    }
    let (channels, out_rank, channel_axis) = match op.op_type.as_str() {
        "Conv" => (w_shape[0], w_shape.len(), 1),
        "ConvTranspose" => (w_shape[1] * usize::try_from(op.attr_int("group", 1).ok()?).ok()?.max(1), w_shape.len(), 1),
        _ => {
            let trans_b = op.attr_int("transB", 0).ok()? != 0;
            (if trans_b { w_shape[0] } else { w_shape[1] }, 2, 1)
        }
    };
    if let Some(b) = op.inputs().get(2).copied().flatten() {
        let bias = float_initializer(graph, b)?;
        if bias.len() != channels && !(op.op_type == "Gemm" && bias.len() == 1) {
            return None;
        }
    }
    // Broadcast check: every dimension 1 except the output-channel one (C or 1).
    let shape = c.shape();
    if shape.len() > out_rank {
        return None;
    }
    let offset = out_rank - shape.len();
    for (i, d) in shape.iter().enumerate() {
        let ok = if i + offset == channel_axis { *d == channels || *d == 1 } else { *d == 1 };
        if !ok {
            return None;
        }
    }
    let values = c.to_vec::<f32>().ok()?;
    let per_channel: Vec<f32> = if values.len() == channels { values } else { vec![*values.first()?; channels] };
    let (factor, addend) =
        if reader.op_type == "Mul" { (per_channel, vec![0.0; channels]) } else { (vec![1.0; channels], per_channel) };
    Some(Plan { reader: reader_id, input: y, output, constant, factor, addend })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x → Conv(W 2×1×1×1, no bias) → Mul([1,2,1,1]) → Add([1,2,1,1]) → y.
    fn graph() -> Graph {
        let mut g = Graph::new("g");
        let x = g.ensure_variable("x");
        g.add_graph_input(x).unwrap();
        let w = g.add_initializer("w", TensorData::from_vec(vec![2, 1, 1, 1], &[1.0f32, 2.0]).unwrap()).unwrap();
        let s = g.add_initializer("s", TensorData::from_vec(vec![1, 2, 1, 1], &[3.0f32, 0.5]).unwrap()).unwrap();
        let b = g.add_initializer("b", TensorData::from_vec(vec![1, 2, 1, 1], &[1.0f32, -1.0]).unwrap()).unwrap();
        let (c, m, y) = (g.ensure_variable("c"), g.ensure_variable("m"), g.ensure_variable("y"));
        g.add_operation(Operation::new("Conv", "conv"), &[Some(x), Some(w)], &[Some(c)]).unwrap();
        g.add_operation(Operation::new("Mul", "mul"), &[Some(s), Some(c)], &[Some(m)]).unwrap();
        g.add_operation(Operation::new("Add", "add"), &[Some(m), Some(b)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        g
    }

    #[test]
    fn mul_then_add_fold_into_the_conv() {
        let mut g = graph();
        let mut total = 0;
        loop {
            let n = channel_affine_to_batchnorm(&mut g).unwrap();
            total += super::super::fold_batchnorm(&mut g).unwrap();
            if n == 0 {
                break;
            }
        }
        assert_eq!(total, 2);
        let types: Vec<&str> = g.operations().map(|(_, op)| op.op_type.as_str()).collect();
        assert_eq!(types, ["Conv"]);
        let conv = g.operations().next().unwrap().1;
        let w = g.variable(conv.inputs()[1].unwrap()).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        let b = g.variable(conv.inputs()[2].unwrap()).unwrap().value.as_ref().unwrap().to_vec::<f32>().unwrap();
        assert_eq!((w, b), (vec![3.0, 1.0], vec![1.0, -1.0]));
        // The graph output keeps its name.
        assert_eq!(g.var_name(conv.outputs()[0].unwrap()), "y");
    }

    #[test]
    fn a_constant_varying_along_another_axis_is_left_alone() {
        let mut g = graph();
        let s = g.var_id("s").unwrap();
        g.variable_mut(s).unwrap().value = Some(TensorData::from_vec(vec![2], &[3.0f32, 0.5]).unwrap());
        assert_eq!(channel_affine_to_batchnorm(&mut g).unwrap(), 0, "[2] broadcasts along the width");
    }
}
