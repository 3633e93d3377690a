//! `edge_layers`: the first and the last weighted operations of the network keep wider weights
//! (`[pipeline] edge_weight_bits`, `--edge-weight-bits 8`) when the rest go to 4 bits or fewer.
//! The first layer reads the raw input through a handful of channels and the last one writes the
//! logits or boxes directly: rounding their weights coarsely costs more than anywhere else, and
//! they hold few of the model's weights. AdaRound, BRECQ, QDrop and MQBench all keep them at 8
//! bits in the low-bit results they publish, so comparisons with those need the same.
//!
//! "First": a weighted operation reached from a graph input through no other weighted operation;
//! "last": one from which a graph output is reached through no other. A model with several heads
//! (a detector) has several last layers, one with parallel stems several first ones. Runs right
//! after `init_quantization`, before anything is calibrated; a weight config whose range form the
//! platform chose itself (neither signed, signed narrow nor unsigned) is left as it is.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, config_at, config_at_mut};
use mppq_ir::{Graph, OpId, VarId, op_roles};
use std::collections::HashSet;

pub struct EdgeLayers {
    /// Weight bits of the edge layers.
    pub weight_bits: u32,
}

/// The weight configs of `id` (slots reading an initializer whose config is quantized).
fn weight_configs(graph: &Graph, id: OpId) -> Vec<ConfigLocation> {
    let Ok(op) = graph.operation(id) else { return Vec::new() };
    op_roles(op)
        .weight_slots()
        .filter(|&(slot, _, _)| {
            let reads_parameter = op
                .inputs()
                .get(slot)
                .copied()
                .flatten()
                .is_some_and(|v| graph.variable(v).is_ok_and(|v| v.is_parameter()));
            let location = ConfigLocation { op: id, side: ConfigSide::Input, index: slot };
            reads_parameter
                && config_at(graph, location)
                    .is_some_and(|c| matches!(c.state, QuantizationState::Initial | QuantizationState::Activated))
        })
        .map(|(slot, _, _)| ConfigLocation { op: id, side: ConfigSide::Input, index: slot })
        .collect()
}

fn is_weighted(graph: &Graph, id: OpId) -> bool {
    !weight_configs(graph, id).is_empty()
}

/// The weighted operations met first when walking from `start` along `next` (the readers or the
/// producer of a value), not walking past any weighted operation.
fn first_weighted(graph: &Graph, start: &[VarId], next: impl Fn(OpId) -> Vec<VarId>, readers: bool) -> Vec<OpId> {
    let (mut seen, mut found) = (HashSet::new(), Vec::new());
    let mut stack: Vec<VarId> = start.to_vec();
    while let Some(var) = stack.pop() {
        let ops = if readers { graph.consumers(var).to_vec() } else { graph.producer(var).into_iter().collect() };
        for op in ops {
            if !seen.insert(op) {
                continue;
            }
            if is_weighted(graph, op) {
                found.push(op);
            } else {
                stack.extend(next(op));
            }
        }
    }
    found
}

/// The first and the last weighted operations of `graph` (see the module doc), front to back.
pub fn edge_layers(graph: &Graph) -> Vec<OpId> {
    let outputs_of = |op: OpId| graph.operation(op).map(|o| o.output_ids().collect()).unwrap_or_default();
    let inputs_of = |op: OpId| {
        graph
            .operation(op)
            .map(|o| o.input_ids().filter(|&v| graph.variable(v).is_ok_and(|v| !v.is_parameter())).collect())
            .unwrap_or_default()
    };
    let mut edges = first_weighted(graph, &graph.feed_inputs(), outputs_of, true);
    edges.extend(first_weighted(graph, graph.outputs(), inputs_of, false));
    let edges: HashSet<OpId> = edges.into_iter().collect();
    let order = graph.topological_order().unwrap_or_default();
    order.into_iter().filter(|op| edges.contains(op)).collect()
}

impl Pass for EdgeLayers {
    fn name(&self) -> &'static str {
        "edge_layers"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let (mut widened, mut names) = (0, Vec::new());
        for op in edge_layers(ctx.graph) {
            let mut changed = false;
            for location in weight_configs(ctx.graph, op) {
                let Some(config) = config_at_mut(ctx.graph, location) else { continue };
                if config.num_of_bits >= self.weight_bits {
                    continue;
                }
                if let Some(wider) = config.at_bits(self.weight_bits) {
                    *config = wider;
                    changed = true;
                }
            }
            if changed {
                widened += 1;
                names.push(ctx.graph.operation(op).in_pass(self.name())?.name.clone());
            }
        }
        let detail = match widened {
            0 => format!("no edge layer has weights under {} bits", self.weight_bits),
            _ => format!("{widened} edge layers keep {}-bit weights: {}", self.weight_bits, names.join(", ")),
        };
        Ok(PassReport::new(self.name(), widened, detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv, graph_with_input, snr_db, unary};
    use mppq_quant::quantizer::LowBitQuantizer;

    /// x → conv1 → Relu → conv2 → Relu → conv3 → y, and conv1 → side → z (a second head).
    fn three_convs() -> Graph {
        let (mut g, x) = graph_with_input("x");
        let c1 = conv(&mut g, "conv1", x, 3, 8, 1);
        let r1 = unary(&mut g, "Relu", "relu1", c1);
        let c2 = conv(&mut g, "conv2", r1, 8, 8, 5);
        let r2 = unary(&mut g, "Relu", "relu2", c2);
        let y = conv(&mut g, "conv3", r2, 8, 4, 9);
        let side = unary(&mut g, "Sigmoid", "side", c1);
        g.add_graph_output(y).unwrap();
        g.add_graph_output(side).unwrap();
        g
    }

    fn bits(h: &Harness, op: &str) -> (u32, i64, i64) {
        let c = h.config(ConfigLocation { op: h.op(op), side: ConfigSide::Input, index: 1 });
        (c.num_of_bits, c.quant_min, c.quant_max)
    }

    #[test]
    fn the_first_and_last_weighted_ops_are_the_edges() {
        let mut h = Harness::new(three_convs());
        h.quantize(&LowBitQuantizer::default());
        let names: Vec<_> =
            edge_layers(&h.graph).into_iter().map(|op| h.graph.operation(op).unwrap().name.clone()).collect();
        // conv1 is both first and (through the side head) last; conv3 is last.
        assert_eq!(names, ["conv1", "conv3"]);
    }

    #[test]
    fn edge_layers_get_wider_weights_and_a_better_output() {
        let run = |widen: bool| {
            let mut h = Harness::new(three_convs());
            h.calibration("x", &[1, 3, 6, 6], 4);
            h.quantize(&LowBitQuantizer { weight_bits: 3, ..Default::default() });
            if widen {
                let report = h.run_pass(&mut EdgeLayers { weight_bits: 8 });
                assert_eq!(report.changed, 2, "{report}");
            }
            h.pipeline(&crate::PipelineSetting { optimize: 0, ..Default::default() });
            let feeds = h.input("x", &[1, 3, 6, 6], 9.5);
            (snr_db(&h.run_fp32(&feeds), &h.run_sim(&feeds)), h)
        };
        let (narrow, _) = run(false);
        let (wide, h) = run(true);
        assert_eq!(bits(&h, "conv1"), (8, -128, 127));
        assert_eq!(bits(&h, "conv3"), (8, -128, 127));
        assert_eq!(bits(&h, "conv2").0, 3, "the middle layer keeps the platform's bits");
        assert!(wide > narrow + 3.0, "edge layers at 8 bits: {wide:.2} dB vs {narrow:.2} dB");
    }
}
