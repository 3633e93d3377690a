//! `redundant_quant_simplify`: a tensor is quantized once. A consumer's input config on a
//! tensor whose producer's output config quantizes it identically becomes `Overlapped`,
//! dominated by the producer's output (the consumer reads already-quantized values). When no
//! producer config quantizes the tensor (a graph input, a float producer), the first
//! consumer's config dominates the other identical ones: they stay active (each consumer
//! quantizes its own read) but share one calibrated scale/offset, exported once.

use crate::error::{PassError, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::slots::quantizes;
use mppq_ir::quant::location::{input, output};
use mppq_ir::quant::{ConfigLocation, QuantizationState, config_at, config_at_mut};
use mppq_ir::{Graph, OpId, VarId};
use std::collections::HashMap;

pub struct RedundantQuantSimplify;

/// The input slots of each operation by the variable they read, built once: scanning an
/// operation's inputs for every variable it reads was quadratic (a Sum of 20 000 inputs: 24 s).
fn input_slots(graph: &Graph) -> HashMap<(OpId, VarId), Vec<usize>> {
    let mut slots: HashMap<(OpId, VarId), Vec<usize>> = HashMap::new();
    for (op, o) in graph.operations() {
        for (i, v) in o.inputs().iter().enumerate() {
            if let Some(v) = v {
                slots.entry((op, *v)).or_default().push(i);
            }
        }
    }
    slots
}

/// Input configs reading `var` that are still undecided (in operation order).
fn reader_configs(graph: &Graph, slots: &HashMap<(OpId, VarId), Vec<usize>>, var: VarId) -> Vec<ConfigLocation> {
    let mut readers: Vec<_> = graph.consumers(var).to_vec();
    readers.dedup();
    let mut out = Vec::new();
    for op in readers {
        for &i in slots.get(&(op, var)).into_iter().flatten() {
            let loc = input(op, i);
            let undecided = config_at(graph, loc)
                .is_some_and(|c| c.state == QuantizationState::Initial && c.dominated_by.is_none());
            if undecided {
                out.push(loc);
            }
        }
    }
    out
}

impl Pass for RedundantQuantSimplify {
    fn name(&self) -> &'static str {
        "redundant_quant_simplify"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let graph = &mut *ctx.graph;
        let vars: Vec<VarId> = graph.variables().filter(|(_, v)| !v.is_parameter()).map(|(id, _)| id).collect();
        let (mut overlapped, mut shared) = (0, 0);
        let slots = input_slots(graph);
        for var in vars {
            let readers = reader_configs(graph, &slots, var);
            if readers.is_empty() {
                continue;
            }
            let producer_config = graph.producer(var).and_then(|p| {
                let slot = graph.operation(p).ok()?.outputs().iter().position(|o| *o == Some(var))?;
                let loc = output(p, slot);
                config_at(graph, loc).filter(|c| quantizes(c)).map(|_| loc)
            });
            let (master, rest, state) = match producer_config {
                Some(loc) => (loc, &readers[..], QuantizationState::Overlapped),
                None => (readers[0], &readers[1..], QuantizationState::Initial),
            };
            let master_config = config_at(graph, master).cloned().ok_or_else(|| PassError::Invalid {
                pass: "redundant_quant_simplify",
                message: format!("variable `{}`: its config vanished", graph.var_name(var)),
            })?;
            for loc in rest {
                let Some(c) = config_at_mut(graph, *loc) else { continue };
                if !c.same_scheme(&master_config) {
                    continue;
                }
                c.dominated_by = Some(master);
                c.state = state;
                if state == QuantizationState::Overlapped {
                    overlapped += 1;
                } else {
                    shared += 1;
                }
            }
        }
        Ok(PassReport::new(
            self.name(),
            overlapped + shared,
            format!("{overlapped} input configs overlapped by their producer, {shared} shared with another reader"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_relu_conv, shared_input_concat_pool};
    use mppq_quant::quantizer::{OnnxRuntimeQuantizer, TensorRtQuantizer};

    #[test]
    fn consumer_of_a_quantized_output_is_overlapped() {
        let mut h = Harness::new(conv_relu_conv());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let report = h.run_pass(&mut RedundantQuantSimplify);
        // conv1 → relu and relu → conv2: both readers overlapped; x has one reader.
        assert_eq!(report.changed, 2);
        let (conv1, relu, conv2) = (h.op("conv1"), h.op("relu"), h.op("conv2"));
        let c = h.config(input(conv2, 0));
        assert_eq!((c.state, c.dominated_by), (QuantizationState::Overlapped, Some(output(relu, 0))));
        assert_eq!(h.config(input(relu, 0)).dominated_by, Some(output(conv1, 0)));
        // The weight configs are not touched.
        assert_eq!(h.config(input(conv2, 1)).state, QuantizationState::Initial);
        assert_eq!(h.config(input(conv1, 0)).dominated_by, None);
    }

    #[test]
    fn readers_of_a_graph_input_share_the_first_config() {
        let mut h = Harness::new(shared_input_concat_pool());
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.run_pass(&mut RedundantQuantSimplify);
        let (a, b) = (h.op("a"), h.op("b"));
        let c = h.config(input(b, 0));
        assert_eq!((c.state, c.dominated_by), (QuantizationState::Initial, Some(input(a, 0))));
        assert_eq!(h.config(input(a, 0)).dominated_by, None);
    }

    #[test]
    fn differently_quantized_reads_are_kept() {
        // Producer int8 symmetric (trt) but the reader asks for uint8: not the same quantization.
        let mut h = Harness::new(conv_relu_conv());
        h.quantize(&TensorRtQuantizer::default());
        let (relu, conv2) = (h.op("relu"), h.op("conv2"));
        mppq_ir::quant::config_at_mut(&mut h.graph, input(conv2, 0)).unwrap().quant_min = 0;
        let report = h.run_pass(&mut RedundantQuantSimplify);
        assert_eq!(report.changed, 1);
        assert_eq!(h.config(input(relu, 0)).state, QuantizationState::Overlapped);
        assert_eq!(h.config(input(h.op("conv2"), 0)).state, QuantizationState::Initial);
    }
}
