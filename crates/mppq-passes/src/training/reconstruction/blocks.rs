//! Where the training passes cut the graph: the trainable operations and the blocks they are
//! trained in (one layer, or single-entry/single-exit sub-graphs).

use super::BlockKind;
use crate::error::{InPass, Result};
use crate::runtime::params::op_params;
use crate::structural::quant_fusion::fused_activation;
use mppq_ir::quant::QuantizationState;
use mppq_ir::{Graph, OpClass, OpId, VarId, op_roles};
use std::collections::HashMap;

/// A block: the variables it starts from and ends at, and the weight operations it trains.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub ops: Vec<String>,
}

/// Operations whose weight can be trained: Conv/ConvTranspose/Gemm/MatMul with a float
/// initializer weight of their own, quantized linearly (calibrated, not baked).
pub fn trainable_ops(graph: &Graph) -> Vec<OpId> {
    let Ok(order) = graph.topological_order() else { return Vec::new() };
    order
        .into_iter()
        .filter(|&id| {
            let Ok(op) = graph.operation(id) else { return false };
            let roles = op_roles(op);
            if !roles.is(OpClass::WeightedLinear) {
                return false;
            }
            let Some((slot, _, _)) = roles.weight() else { return false };
            let Some(Some(var)) = op.inputs().get(slot).copied() else { return false };
            let config = op.quant_config.as_ref().and_then(|c| c.input_configs.get(slot)).and_then(Option::as_ref);
            let linear = config.is_some_and(|c| {
                c.state == QuantizationState::Activated && !c.policy.is_floating() && !c.scale.is_empty()
            });
            linear
                && graph.consumers(var).len() == 1
                && op_params(graph, id).is_ok_and(|p| p.weight.is_some_and(|w| w.var == var))
        })
        .collect()
}

/// The blocks of `graph` by `kind` (see the module doc), front to back.
pub fn find_blocks(graph: &Graph, kind: BlockKind, max_block_ops: usize) -> Result<Vec<Block>> {
    let trainable = trainable_ops(graph);
    let name_of = |v: VarId| graph.var_name(v).to_string();
    let op_name = |id: OpId| graph.operation(id).map(|o| o.name.clone()).unwrap_or_default();
    if kind == BlockKind::Layer {
        let mut blocks = Vec::new();
        for id in trainable {
            let op = graph.operation(id).in_pass("reconstruction")?;
            let inputs: Vec<String> =
                op.input_ids().filter(|v| graph.variable(*v).is_ok_and(|v| v.value.is_none())).map(name_of).collect();
            let Some(Some(out)) = op.outputs().first().copied() else { continue };
            let measured = fused_activation(graph, id).map_or(out, |(_, o)| o);
            blocks.push(Block { inputs, outputs: vec![name_of(measured)], ops: vec![op_name(id)] });
        }
        return Ok(blocks);
    }
    // Live values between operations k and k+1 of the topological order; a cut is a position
    // where as few values are live as anywhere (one for a chain of residual blocks).
    let order = graph.topological_order().in_pass("reconstruction")?;
    let position: HashMap<OpId, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let n = order.len();
    let mut last_use: HashMap<VarId, usize> = HashMap::new();
    for (i, &id) in order.iter().enumerate() {
        let op = graph.operation(id).in_pass("reconstruction")?;
        for v in op.input_ids().chain(graph.implicit_inputs(id)) {
            let e = last_use.entry(v).or_insert(i);
            *e = (*e).max(i);
        }
    }
    for &v in graph.outputs() {
        last_use.insert(v, n);
    }
    let defined = |v: VarId| -> Option<usize> {
        let var = graph.variable(v).ok()?;
        if var.value.is_some() {
            return None; // initializers are not activations
        }
        Some(graph.producer(v).and_then(|p| position.get(&p).map(|k| k + 1)).unwrap_or(0))
    };
    // live[k]: values defined at or before boundary k (after k ops) and read after it.
    let mut live: Vec<Vec<VarId>> = vec![Vec::new(); n + 1];
    for (&v, &last) in &last_use {
        let Some(def) = defined(v) else { continue };
        for slot in live.iter_mut().take(last.min(n) + 1).skip(def) {
            slot.push(v);
        }
    }
    for slot in &mut live {
        slot.sort();
        slot.dedup();
    }
    let trainable_at: Vec<bool> = order.iter().map(|id| trainable.contains(id)).collect();
    let (Some(first), Some(last)) = (trainable_at.iter().position(|t| *t), trainable_at.iter().rposition(|t| *t))
    else {
        return Ok(Vec::new());
    };
    let least = (first..=last + 1).map(|k| live[k].len()).min().unwrap_or(1).max(1);
    let cuts: Vec<usize> =
        (0..=n).filter(|&k| k == 0 || k == n || (live[k].len() <= least && !live[k].is_empty())).collect();
    let mut blocks = Vec::new();
    let (mut start, mut ops): (usize, Vec<String>) = (0, Vec::new());
    for pair in cuts.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let segment: Vec<String> = (a..b).filter(|&k| trainable_at[k]).map(|k| op_name(order[k])).collect();
        if !ops.is_empty() && ops.len() + segment.len() > max_block_ops && !segment.is_empty() {
            blocks.push(Block {
                inputs: live[start].iter().map(|v| name_of(*v)).collect(),
                outputs: live[a].iter().map(|v| name_of(*v)).collect(),
                ops: std::mem::take(&mut ops),
            });
            start = a;
        }
        if ops.is_empty() && segment.is_empty() {
            start = b; // nothing to train before this cut
            continue;
        }
        ops.extend(segment);
    }
    if !ops.is_empty() {
        // The last block ends at the last cut after its last weight operation.
        let end = cuts.iter().copied().find(|&k| k > last).unwrap_or(n);
        blocks.push(Block {
            inputs: live[start].iter().map(|v| name_of(*v)).collect(),
            outputs: live[end].iter().map(|v| name_of(*v)).collect(),
            ops,
        });
    }
    Ok(blocks)
}
