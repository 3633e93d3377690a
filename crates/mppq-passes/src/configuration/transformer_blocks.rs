//! `transformer_blocks`: the quantization of a transformer, found from the graph. A graph is a
//! transformer when it has attention: a Softmax whose scores come from a product of two
//! activations (Q·Kᵀ, through scaling and masking) and whose probabilities are multiplied by
//! another activation (·V). In such a graph:
//!
//! - the linear layers (MatMul/Gemm with a weight) and the two attention products quantize their
//!   **inputs only**: their outputs stay float. A transformer's residual stream carries a few
//!   channels 30–200× larger than the rest (all-MiniLM-L6-v2: channel 99 of the FFN output at
//!   195 where the median channel peaks at 1), so one per-tensor scale on a linear layer's output
//!   leaves the other channels a handful of levels; the layer's output cost 15 dB there. ONNX
//!   Runtime runs `DQ → MatMul` without a `Q` after it as MatMulIntegerToFloat: integer products,
//!   float result, the same speed;
//! - the element-wise operations fed by them (bias and residual additions, the GELU/SiLU
//!   arithmetic, the attention's scale and mask) stay float: they read float values, and the
//!   next linear layer quantizes what it reads itself.
//!
//! Convolutions and what leads to the first linear layer (a ViT's patch embedding, the CNN
//! backbone before an OCR model's attention neck) keep the platform's quantization. NNCF's
//! transformer preset reaches a similar placement by ignoring Add/Mul/Sub/Div/Pow/Reduce* types
//! everywhere; here only what the transformer blocks feed is touched. SmoothQuant, which takes
//! the outliers of the linear layers' inputs into their weights, is switched on for transformer
//! graphs by the pipeline (see `smooth_quant`).
//!
//! A guarded transform, the first of them: measured on the calibration data and undone when the
//! graph outputs' SNR does not rise (PP-OCRv4 rec, a CNN with a two-block attention neck, keeps
//! its CNN placement that way). It runs after `redundant_quant_simplify`, so a config that
//! shared the parameters of one it turned float quantizes on its own again.

use crate::error::{InPass, Result};
use crate::runtime::guard::Guard;
use crate::runtime::params::op_params;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, TargetPrecision, config_at};
use mppq_ir::{Graph, OpClass, OpId, VarId, op_roles};
use std::collections::{BTreeMap, HashSet};

pub struct TransformerBlocks;

/// One attention: its Softmax and the two products around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attention {
    pub softmax: OpId,
    /// Q·Kᵀ (a product of two activations).
    pub scores: OpId,
    /// probabilities · V.
    pub context: OpId,
}

/// An operation that may sit between Q·Kᵀ and the Softmax: a relay (head reshapes and
/// transposes), element-wise arithmetic (scale, mask), a Where or a Cast (the mask's making).
fn on_score_path(op: &mppq_ir::Operation) -> bool {
    let roles = op_roles(op);
    roles.is(OpClass::Relay) || roles.is(OpClass::Elementwise) || matches!(op.op_type.as_str(), "Where" | "Cast")
}

/// An operation that may sit between the Softmax and ·V: a relay, a Cast, a Dropout.
fn on_probability_path(op: &mppq_ir::Operation) -> bool {
    op_roles(op).is(OpClass::Relay) || matches!(op.op_type.as_str(), "Cast" | "Dropout")
}

/// How many operations either path may hold.
const MAX_PATH: usize = 6;

/// A matrix product (MatMul, Gemm, Einsum): what Q·Kᵀ and ·V are.
fn is_product(op: &mppq_ir::Operation) -> bool {
    let roles = op_roles(op);
    (roles.is(OpClass::WeightedLinear) && !roles.is(OpClass::Convolution)) || op.op_type == "Einsum"
}

fn is_activation(graph: &Graph, var: VarId) -> bool {
    graph.variable(var).is_ok_and(|v| !v.is_parameter())
}

/// A product of two activations reached backwards from `var` through [`on_score_path`] operations.
fn scores_before(graph: &Graph, var: VarId) -> Option<OpId> {
    let mut stack = vec![(var, 0usize)];
    let mut seen = HashSet::new();
    while let Some((var, depth)) = stack.pop() {
        let Some(id) = graph.producer(var) else { continue };
        let Ok(op) = graph.operation(id) else { continue };
        if is_product(op) && op.input_ids().filter(|v| is_activation(graph, *v)).count() == 2 {
            return Some(id);
        }
        if depth < MAX_PATH && on_score_path(op) && seen.insert(id) {
            stack.extend(op.input_ids().filter(|v| is_activation(graph, *v)).map(|v| (v, depth + 1)));
        }
    }
    None
}

/// A product reading `var`, forwards through [`on_probability_path`] operations.
fn context_after(graph: &Graph, var: VarId) -> Option<OpId> {
    let mut stack = vec![(var, 0usize)];
    while let Some((var, depth)) = stack.pop() {
        for &id in graph.consumers(var) {
            let Ok(op) = graph.operation(id) else { continue };
            if is_product(op) {
                return Some(id);
            }
            if depth < MAX_PATH && on_probability_path(op) {
                stack.extend(op.output_ids().map(|v| (v, depth + 1)));
            }
        }
    }
    None
}

/// Every attention of `graph`, in graph order.
pub fn attention_blocks(graph: &Graph) -> Vec<Attention> {
    let order = graph.topological_order().unwrap_or_default();
    order
        .into_iter()
        .filter_map(|id| {
            let op = graph.operation(id).ok()?;
            if op.op_type != "Softmax" || !op.in_default_domain() {
                return None;
            }
            let scores = scores_before(graph, op.inputs().first().copied().flatten()?)?;
            let context = context_after(graph, op.outputs().first().copied().flatten()?)?;
            Some(Attention { softmax: id, scores, context })
        })
        .collect()
}

/// A dense linear layer: MatMul/Gemm with a weight initializer (no convolution).
fn is_linear_layer(graph: &Graph, id: OpId) -> bool {
    let Ok(op) = graph.operation(id) else { return false };
    let roles = op_roles(op);
    roles.is(OpClass::WeightedLinear)
        && !roles.is(OpClass::Convolution)
        && op_params(graph, id).is_ok_and(|p| p.weight.is_some())
}

/// What an element-wise operation kept float is, for the report.
fn kind(graph: &Graph, id: OpId, in_scores: &HashSet<OpId>) -> &'static str {
    let Ok(op) = graph.operation(id) else { return "other" };
    if in_scores.contains(&id) {
        return "attention scale/mask";
    }
    let activations = op.input_ids().filter(|v| is_activation(graph, *v)).count();
    match (op.op_type.as_str(), activations) {
        ("Add", 1) => "bias add",
        ("Add", _) => "residual add",
        _ => "activation arithmetic",
    }
}

/// Operations on the paths from Q·Kᵀ (and the mask) to the Softmax.
fn score_paths(graph: &Graph, blocks: &[Attention]) -> HashSet<OpId> {
    let mut found = HashSet::new();
    for block in blocks {
        let softmax_input = graph.operation(block.softmax).ok().and_then(|o| o.inputs().first().copied().flatten());
        let mut stack: Vec<(OpId, usize)> =
            softmax_input.and_then(|v| graph.producer(v)).map(|p| (p, 0)).into_iter().collect();
        while let Some((id, depth)) = stack.pop() {
            let Ok(op) = graph.operation(id) else { continue };
            if id == block.scores || depth > MAX_PATH || !on_score_path(op) || !found.insert(id) {
                continue;
            }
            stack.extend(
                op.input_ids()
                    .filter(|v| is_activation(graph, *v))
                    .filter_map(|v| graph.producer(v))
                    .map(|p| (p, depth + 1)),
            );
        }
    }
    found
}

/// Configs that share the parameters of a config now float (`dominated_by` one turned `Fp32`)
/// quantize on their own again: an `Overlapped` reader of a float producer, a second reader that
/// shared the first reader's scale.
fn release_float_dominators(graph: &mut Graph) {
    let mut released = Vec::new();
    for (id, op) in graph.operations() {
        let Some(config) = op.quant_config.as_ref() else { continue };
        let sides = [(ConfigSide::Input, &config.input_configs), (ConfigSide::Output, &config.output_configs)];
        for (side, slots) in sides {
            for (index, c) in slots.iter().enumerate() {
                let Some(master) = c.as_ref().and_then(|c| c.dominated_by) else { continue };
                if config_at(graph, master).is_some_and(|m| m.state == QuantizationState::Fp32)
                    && c.as_ref().is_some_and(|c| c.state != QuantizationState::Fp32)
                {
                    released.push(ConfigLocation { op: id, side, index });
                }
            }
        }
    }
    for location in released {
        if let Some(c) = mppq_ir::quant::config_at_mut(graph, location) {
            c.detach();
        }
    }
}

impl Pass for TransformerBlocks {
    fn name(&self) -> &'static str {
        "transformer_blocks"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let graph = &mut *ctx.graph;
        let blocks = attention_blocks(graph);
        if blocks.is_empty() {
            return Ok(PassReport::new(self.name(), 0, "no attention: not a transformer"));
        }
        let products: HashSet<OpId> = blocks.iter().flat_map(|b| [b.scores, b.context]).collect();
        let linears: Vec<OpId> = graph
            .operations()
            .map(|(id, _)| id)
            .filter(|id| is_linear_layer(graph, *id) || products.contains(id))
            .collect();
        let in_scores = score_paths(graph, &blocks);
        // Outputs of the linear layers and products: float.
        let mut outputs_float = 0;
        for &id in &linears {
            let Some(config) = graph.operation_mut(id).in_pass(self.name())?.quant_config.as_mut() else { continue };
            let mut changed = false;
            for c in config.output_configs.iter_mut().flatten() {
                if c.state == QuantizationState::Initial {
                    c.state = QuantizationState::Fp32;
                    changed = true;
                }
            }
            outputs_float += usize::from(changed);
        }
        // What they feed, up to the next weighted or attention product: float.
        let stops: HashSet<OpId> = linears.iter().copied().collect();
        let mut seen = HashSet::new();
        let mut stack: Vec<VarId> =
            linears.iter().filter_map(|id| graph.operation(*id).ok()).flat_map(|o| o.output_ids()).collect();
        let mut kept_float: BTreeMap<&'static str, usize> = BTreeMap::new();
        while let Some(var) = stack.pop() {
            for &id in graph.consumers(var).to_vec().iter() {
                if stops.contains(&id) || !seen.insert(id) {
                    continue;
                }
                let op = graph.operation(id).in_pass(self.name())?;
                if op_roles(op).is(OpClass::WeightedLinear) {
                    continue; // a convolution quantizes its own input
                }
                stack.extend(op.output_ids());
                if op.precision == TargetPrecision::Fp32 || op.quant_config.is_none() {
                    continue;
                }
                *kept_float.entry(kind(graph, id, &in_scores)).or_default() += 1;
                graph.operation_mut(id).in_pass(self.name())?.keep_in_float();
            }
        }
        let float_ops: usize = kept_float.values().sum();
        release_float_dominators(graph);
        let kinds: Vec<String> = kept_float.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let first = graph.operation(blocks[0].softmax).map(|o| o.name.clone()).unwrap_or_default();
        let summary = format!(
            "{} attention blocks (first: `{first}`); {} linear layers and attention products quantize their inputs, outputs float; {} element-wise ops they feed kept float{}",
            blocks.len(),
            outputs_float,
            float_ops,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) }
        );
        Ok(PassReport::new(self.name(), outputs_float + float_ops, summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_relu_conv, graph_with_input, init, var};
    use mppq_ir::quant::location::{input, output};
    use mppq_ir::{Attribute, Operation};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    fn op(g: &mut Graph, op_type: &str, name: &str, inputs: &[VarId]) -> VarId {
        let y = var(g, &format!("{name}.out"));
        let inputs: Vec<_> = inputs.iter().map(|v| Some(*v)).collect();
        g.add_operation(Operation::new(op_type, name), &inputs, &[Some(y)]).unwrap();
        y
    }

    /// x[1,8,16] → Q/K/V projections → Q·Kᵀ → ·scale → Softmax → ·V → output projection → + bias
    /// → + x (residual) → y.
    fn attention_block() -> Graph {
        let (mut g, x) = graph_with_input("x");
        let [wq, wk, wv, wo] = [1, 2, 3, 4].map(|s| init(&mut g, &format!("w{s}"), &[16, 16], s, 0.3));
        let bq = init(&mut g, "bq", &[16], 5, 0.1);
        let bo = init(&mut g, "bo", &[16], 6, 0.1);
        let scale = init(&mut g, "scale", &[1], 7, 0.1);
        let q = op(&mut g, "MatMul", "q", &[x, wq]);
        let qb = op(&mut g, "Add", "q_bias", &[q, bq]);
        let k = op(&mut g, "MatMul", "k", &[x, wk]);
        let kt = var(&mut g, "kt");
        let transpose = Operation::new("Transpose", "kt").with_attr("perm", Attribute::Ints(vec![0, 2, 1]));
        g.add_operation(transpose, &[Some(k)], &[Some(kt)]).unwrap();
        let v = op(&mut g, "MatMul", "v", &[x, wv]);
        let s = op(&mut g, "MatMul", "scores", &[qb, kt]);
        let scaled = op(&mut g, "Mul", "scale", &[s, scale]);
        let p = var(&mut g, "p");
        let softmax = Operation::new("Softmax", "softmax").with_attr("axis", Attribute::Int(-1));
        g.add_operation(softmax, &[Some(scaled)], &[Some(p)]).unwrap();
        let c = op(&mut g, "MatMul", "context", &[p, v]);
        let o = op(&mut g, "MatMul", "out", &[c, wo]);
        let ob = op(&mut g, "Add", "out_bias", &[o, bo]);
        let y = op(&mut g, "Add", "residual", &[ob, x]);
        g.add_graph_output(y).unwrap();
        g
    }

    #[test]
    fn finds_the_attention_and_keeps_what_the_linear_layers_feed_float() {
        let mut h = Harness::new(attention_block());
        let blocks = attention_blocks(&h.graph);
        assert_eq!(
            blocks,
            vec![Attention { softmax: h.op("softmax"), scores: h.op("scores"), context: h.op("context") }]
        );
        h.calibration("x", &[1, 8, 16], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let report = h.run_pass(&mut TransformerBlocks);
        assert!(report.summary.starts_with("1 attention blocks"), "{}", report.summary);
        // (The probabilities stay float on this platform: `context` quantizes V alone.)
        for (name, read) in [("q", 0), ("k", 0), ("v", 0), ("scores", 0), ("scores", 1), ("context", 1), ("out", 0)] {
            assert_eq!(h.config(output(h.op(name), 0)).state, QuantizationState::Fp32, "{name} output");
            assert_eq!(h.config(input(h.op(name), read)).state, QuantizationState::Initial, "{name} input {read}");
        }
        for name in ["q_bias", "scale", "out_bias", "residual"] {
            assert_eq!(h.graph.operation(h.op(name)).unwrap().precision, TargetPrecision::Fp32, "{name}");
        }
        assert!(
            report.summary.contains("2 bias add") && report.summary.contains("1 residual add"),
            "{}",
            report.summary
        );
        assert!(report.summary.contains("1 attention scale/mask"), "{}", report.summary);
    }

    #[test]
    fn leaves_graphs_without_attention_alone() {
        let mut h = Harness::new(conv_relu_conv());
        h.calibration("x", &[1, 2, 4, 4], 1);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let before = h.graph.clone();
        let report = h.run_pass(&mut TransformerBlocks);
        assert_eq!((report.changed, h.graph == before), (0, true));
    }
}
