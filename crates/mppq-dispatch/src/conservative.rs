//! `conservative`: keeps as much as it can in FP32. The quantized region starts at computing
//! ops (Conv, Gemm, MatMul, ...) of declared types and grows downstream only into an op that
//! the quantizer declares, that is not precision-sensitive ([`OpClass::PrecisionSensitive`]
//! in the operator-role table: Softmax, normalisations, Exp/Log/Div/Erf, ...) and whose every activation input comes from the region.
//! The region stops at the first op that fails this; linear activations follow their producer;
//! the shape-or-index region stays SOI.

use crate::analysis::{Prepared, Proposal, activation_inputs, finalize, is_computing, is_linear_activation, prepare};
use crate::{Dispatch, DispatchContext, DispatchError, Dispatcher};
use mppq_ir::{Graph, OpClass, OpId, op_roles};
use std::collections::{HashMap, HashSet};

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Conservative;

impl Dispatcher for Conservative {
    fn name(&self) -> &str {
        "conservative"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let proposals = conservative_proposals(graph, ctx, &prep)?;
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}

/// The proposals of `conservative` (also the starting point of `pointwise`).
pub(crate) fn conservative_proposals(
    graph: &Graph,
    ctx: &DispatchContext,
    prep: &Prepared,
) -> Result<HashMap<OpId, Proposal>, DispatchError> {
    let mut region: HashSet<OpId> = HashSet::new();
    let mut proposals = HashMap::new();
    for id in &prep.order {
        let op = graph.operation(*id)?;
        let usable = ctx.declares(&op.op_type) && !prep.ignored.contains_key(id);
        let proposal = if let Some(r) = prep.soi.get(id) {
            Proposal::Soi(r.clone())
        } else if is_computing(op) {
            if usable {
                region.insert(*id);
            }
            Proposal::Quant("computing op".into())
        } else if is_linear_activation(op) {
            let producer = op.inputs().first().copied().flatten().and_then(|v| graph.producer(v));
            if usable && producer.is_some_and(|p| region.contains(&p)) {
                region.insert(*id);
            }
            Proposal::FollowProducer
        } else {
            let inputs: Vec<_> = activation_inputs(op, &prep.statics).collect();
            let outside = inputs.iter().find(|v| !graph.producer(**v).is_some_and(|p| region.contains(&p)));
            let any_inside = inputs.iter().any(|v| graph.producer(*v).is_some_and(|p| region.contains(&p)));
            if !any_inside {
                Proposal::Fp32("conservative: not fed by the quantized region".into())
            } else if op_roles(op).is(OpClass::PrecisionSensitive) {
                Proposal::Fp32(format!("conservative: {} is precision-sensitive", op.op_type))
            } else if let Some(v) = outside {
                Proposal::Fp32(format!(
                    "conservative: input `{}` comes from outside the quantized region",
                    graph.var_name(*v)
                ))
            } else {
                if usable {
                    region.insert(*id);
                }
                Proposal::Quant("conservative: every activation input comes from the quantized region".into())
            }
        };
        proposals.insert(*id, proposal);
    }
    Ok(proposals)
}
