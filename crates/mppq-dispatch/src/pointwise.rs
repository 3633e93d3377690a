//! `pointwise`: only computing ops (Conv, Gemm, MatMul, ...) of declared types are
//! quantized, each on its own; everything else is FP32 except the shape-or-index region.
//! Linear activations are not fused here (as in mPPQ): they stay FP32.

use crate::analysis::{Proposal, finalize, is_computing, prepare};
use crate::conservative::conservative_proposals;
use crate::{Dispatch, DispatchContext, DispatchError, Dispatcher};
use mppq_ir::Graph;

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pointwise;

impl Dispatcher for Pointwise {
    fn name(&self) -> &str {
        "pointwise"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let mut proposals = conservative_proposals(graph, ctx, &prep)?;
        for (id, proposal) in proposals.iter_mut() {
            if matches!(proposal, Proposal::Soi(_)) {
                continue;
            }
            let op = graph.operation(*id)?;
            *proposal = if is_computing(op) {
                Proposal::Quant("pointwise: computing op".into())
            } else {
                Proposal::Fp32("pointwise: only computing ops are quantized".into())
            };
        }
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}
