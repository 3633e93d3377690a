//! `fold_constants`: Constant nodes become initializers (wraps
//! [`mppq_ir::morph::fold_constants`]), first in the pipeline, so weights stored in Constant nodes
//! are weights for BatchNormalization folding, dispatch and the quantizers alike. Then every
//! operation that reads only initializers is computed once and replaced by its result: Silero
//! VAD slices and unsqueezes its LSTM weights out of Constant nodes at run time, which keeps them
//! activations (float) instead of weights.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::{Attribute, Graph, OpId, Operation};

pub struct FoldConstants;

/// Results larger than this many elements stay computed at run time (a ConstantOfShape or Tile
/// of constants can be huge; the model file should not grow by it).
const MAX_FOLDED_ELEMENTS: usize = 1 << 22;

/// Whether `op` gives the same outputs for the same inputs, needs no sub-graph, and reads only
/// initializers (at least one).
fn computable(graph: &Graph, op: &Operation) -> bool {
    const RANDOM: [&str; 6] =
        ["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"];
    op.in_default_domain()
        && !RANDOM.contains(&op.op_type.as_str())
        && !op.attributes.values().any(|a| matches!(a, Attribute::Graph(_) | Attribute::Graphs(_)))
        && op.inputs().iter().flatten().next().is_some()
        && op.inputs().iter().flatten().all(|v| graph.variable(*v).is_ok_and(|v| v.value.is_some()))
        && op.outputs().iter().flatten().all(|v| !graph.is_graph_output(*v))
}

/// Both steps of the pass on `graph` (also what a quantization JSON is applied after, so its
/// names match): Constant nodes made initializers, then operations on constants computed with
/// `registry` on `device`. Returns (nodes, computed).
pub fn fold_all_constants(
    graph: &mut Graph,
    registry: &mppq_exec::OpRegistry,
    device: &mppq_exec::Device,
    opsets: &dyn Fn(&str) -> i64,
) -> Result<(usize, usize)> {
    let nodes = mppq_ir::morph::fold_constants(graph).in_pass("fold_constants")?;
    Ok((nodes, propagate(graph, registry, device, opsets)?))
}

/// Computes the constant operations in graph order (each result can feed the next); returns how
/// many were replaced by initializers.
fn propagate(
    graph: &mut Graph,
    registry: &mppq_exec::OpRegistry,
    device: &mppq_exec::Device,
    opsets: &dyn Fn(&str) -> i64,
) -> Result<usize> {
    let mut folded = 0;
    for id in graph.topological_order().in_pass("fold_constants")? {
        let Ok(op) = graph.operation(id) else { continue };
        if !computable(graph, op) {
            continue;
        }
        let Some(values) = evaluate(graph, id, registry, device, opsets)? else { continue };
        let outputs: Vec<_> = graph.operation(id).in_pass("fold_constants")?.outputs().to_vec();
        graph.remove_operation(id).in_pass("fold_constants")?;
        // The executor returns the present outputs, in order.
        for (var, value) in outputs.into_iter().flatten().zip(values) {
            graph.variable_mut(var).in_pass("fold_constants")?.value = Some(value);
        }
        folded += 1;
    }
    Ok(folded)
}

/// Runs operation `id` alone on its constant inputs; `None` when it cannot run here or its
/// result is too large to store.
fn evaluate(
    graph: &Graph,
    id: OpId,
    registry: &mppq_exec::OpRegistry,
    device: &mppq_exec::Device,
    opsets: &dyn Fn(&str) -> i64,
) -> Result<Option<Vec<mppq_ir::TensorData>>> {
    let op = graph.operation(id).in_pass("fold_constants")?;
    let mut alone = Graph::new("constant");
    let mut inputs = Vec::new();
    for v in op.inputs() {
        inputs.push(match v {
            Some(v) => {
                let var = graph.variable(*v).in_pass("fold_constants")?;
                let Some(value) = var.value.clone() else { return Ok(None) };
                Some(alone.add_initializer(var.name.clone(), value).in_pass("fold_constants")?)
            }
            None => None,
        });
    }
    let outputs: Vec<_> = op.outputs().iter().map(|v| v.map(|v| alone.ensure_variable(graph.var_name(v)))).collect();
    let mut copy = op.clone();
    copy.quant_config = None;
    if alone.add_operation(copy, &inputs, &outputs).is_err() {
        return Ok(None);
    }
    for v in outputs.iter().flatten() {
        alone.add_graph_output(*v).in_pass("fold_constants")?;
    }
    // An operation our executor cannot build or run here simply stays.
    let Ok(exec) = mppq_exec::Executor::new(&alone, registry, device, opsets) else { return Ok(None) };
    let Ok(results) = exec.run(vec![], &mut []) else { return Ok(None) };
    let mut values = Vec::with_capacity(results.len());
    for (_, value) in results {
        let Some(tensor) = value.as_tensor() else { return Ok(None) };
        if tensor.numel() > MAX_FOLDED_ELEMENTS {
            return Ok(None);
        }
        let Ok(data) = tensor.to_data() else { return Ok(None) };
        values.push(data);
    }
    Ok(Some(values))
}

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold_constants"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let (nodes, computed) = fold_all_constants(ctx.graph, ctx.registry, ctx.device, ctx.opsets)?;
        Ok(PassReport::new(
            self.name(),
            nodes + computed,
            format!("{nodes} Constant nodes made initializers, {computed} operations on constants computed"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_ir::quant::location::input;
    use mppq_ir::{Attribute, Operation};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    /// conv_relu_conv with conv2's weight moved into a Constant node, as PaddlePaddle exports it.
    fn weight_in_a_constant() -> mppq_ir::Graph {
        let mut g = conv_relu_conv();
        let w = g.var_id("conv2.w").unwrap();
        let value = g.variable_mut(w).unwrap().value.take().unwrap();
        g.add_operation(
            Operation::new("Constant", "conv2.w_const").with_attr("value", Attribute::Tensor(value)),
            &[],
            &[Some(w)],
        )
        .unwrap();
        g
    }

    /// Silero VAD's pattern: the weight is computed from a constant at run time
    /// (Constant → Unsqueeze → Conv): computed once, it is an initializer, hence a weight.
    #[test]
    fn operations_on_constants_are_computed_once() {
        let mut g = conv_relu_conv();
        let w = g.var_id("conv2.w").unwrap();
        let value = g.variable_mut(w).unwrap().value.take().unwrap();
        let flat = mppq_ir::TensorData::from_vec(vec![value.len()], &value.to_vec::<f32>().unwrap()).unwrap();
        let shape: Vec<i64> = value.shape().iter().map(|d| *d as i64).collect();
        let (packed, dims) = (g.ensure_variable("w_flat"), g.ensure_variable("w_shape"));
        g.add_operation(
            Operation::new("Constant", "w_flat_const").with_attr("value", Attribute::Tensor(flat)),
            &[],
            &[Some(packed)],
        )
        .unwrap();
        g.variable_mut(dims).unwrap().value = Some(mppq_ir::TensorData::from_vec(vec![shape.len()], &shape).unwrap());
        g.add_operation(Operation::new("Reshape", "w_reshape"), &[Some(packed), Some(dims)], &[Some(w)]).unwrap();
        let mut h = Harness::new(g);
        let x = h.input("x", &[1, 2, 4, 4], 1.0);
        let before = h.run_fp32(&x);
        let report = h.run_pass(&mut FoldConstants);
        assert_eq!(report.changed, 2, "{report}");
        assert!(h.graph.operations().all(|(_, op)| op.op_type != "Reshape"));
        assert!(h.graph.variable(h.graph.var_id("conv2.w").unwrap()).unwrap().value.is_some());
        assert_eq!(h.run_fp32(&x), before);
    }

    #[test]
    fn a_weight_in_a_constant_node_is_quantized_as_a_weight() {
        // Without folding, the weight is read at run time: an activation config, per tensor.
        let mut h = Harness::new(weight_in_a_constant());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let conv2 = h.op("conv2");
        assert_eq!(h.config(input(conv2, 1)).channel_axis, None);
        // Folded first, it is a weight: per output channel, symmetric.
        let mut h = Harness::new(weight_in_a_constant());
        assert_eq!(h.run_pass(&mut FoldConstants).changed, 1);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let conv2 = h.op("conv2");
        let w = h.config(input(conv2, 1));
        assert_eq!((w.channel_axis, w.offset.is_empty() || w.offset.iter().all(|o| *o == 0.0)), (Some(0), true));
        // The float function is unchanged.
        let x = h.input("x", &[1, 2, 4, 4], 1.0);
        assert_eq!(h.run_fp32(&x), Harness::new(conv_relu_conv()).run_fp32(&x));
    }
}
