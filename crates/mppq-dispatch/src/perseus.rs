//! `perseus`: every declared op on the activation path is quantized, after a precise
//! shape-or-index analysis. Unlike `allin` it keeps FP32 the ops that compute on constants
//! only (constant-foldable) and the ops that mix shape/index values with activations; linear
//! activations follow their producer.

use crate::analysis::{Proposal, data_inputs, finalize, is_computing, is_linear_activation, prepare};
use crate::{Dispatch, DispatchContext, DispatchError, Dispatcher};
use mppq_ir::Graph;
use std::collections::{HashMap, HashSet};

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Perseus;

impl Dispatcher for Perseus {
    fn name(&self) -> &str {
        "perseus"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let soi_vars: HashSet<_> = prep
            .soi
            .keys()
            .filter_map(|id| graph.operation(*id).ok())
            .flat_map(|op| op.output_ids().collect::<Vec<_>>())
            .collect();
        let mut proposals = HashMap::new();
        for id in &prep.order {
            let op = graph.operation(*id)?;
            let data: Vec<_> = data_inputs(op).collect();
            let proposal = if let Some(r) = prep.soi.get(id) {
                Proposal::Soi(r.clone())
            } else if is_computing(op) {
                Proposal::Quant("computing op".into())
            } else if is_linear_activation(op) {
                Proposal::FollowProducer
            } else if data.iter().all(|v| prep.statics.contains(v)) {
                Proposal::Fp32("perseus: computes on constants only".into())
            } else if let Some(v) = data.iter().find(|v| soi_vars.contains(v)) {
                Proposal::Fp32(format!(
                    "perseus: mixes the shape/index value `{}` with activations",
                    graph.var_name(*v)
                ))
            } else {
                Proposal::Quant("perseus: declared type on the activation path".into())
            };
            proposals.insert(*id, proposal);
        }
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}
