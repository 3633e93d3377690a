//! `aggressive`: the quantized region is everything downstream of a computing op (Conv,
//! Gemm, MatMul, ...) through activation edges, whatever the op types on the way; only the
//! shape-or-index region and upstream-only operations (e.g. pre-processing before the first
//! computing op) stay out. Ops of types the quantizer does not declare fall back to FP32 but do
//! not stop the region.

use crate::analysis::{Prepared, Proposal, activation_inputs, finalize, is_computing, is_linear_activation, prepare};
use crate::{Dispatch, DispatchContext, DispatchError, Dispatcher};
use mppq_ir::{Graph, OpId};
use std::collections::HashMap;

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Aggressive;

impl Dispatcher for Aggressive {
    fn name(&self) -> &str {
        "aggressive"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let proposals = aggressive_proposals(graph, &prep)?;
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}

fn aggressive_proposals(graph: &Graph, prep: &Prepared) -> Result<HashMap<OpId, Proposal>, DispatchError> {
    // Each region op maps to the computing op its region started from.
    let mut root: HashMap<OpId, String> = HashMap::new();
    let mut proposals = HashMap::new();
    for id in &prep.order {
        let op = graph.operation(*id)?;
        let proposal = if let Some(r) = prep.soi.get(id) {
            Proposal::Soi(r.clone())
        } else if is_computing(op) {
            root.insert(*id, op.name.clone());
            Proposal::Quant("computing op".into())
        } else {
            let from = activation_inputs(op, &prep.statics)
                .filter_map(|v| graph.producer(v))
                .find_map(|p| root.get(&p).cloned());
            match from {
                Some(r) => {
                    root.insert(*id, r.clone());
                    if is_linear_activation(op) {
                        Proposal::FollowProducer
                    } else {
                        Proposal::Quant(format!("aggressive: downstream of computing op `{r}`"))
                    }
                }
                None if is_linear_activation(op) => Proposal::FollowProducer,
                None => Proposal::Fp32("aggressive: not downstream of any computing op".into()),
            }
        };
        proposals.insert(*id, proposal);
    }
    Ok(proposals)
}
