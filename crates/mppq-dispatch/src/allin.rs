//! `allin`: every operation of a type the quantizer declares is quantized (for NPUs that run
//! everything in integers); shape-or-index operations stay SOI; the rest is FP32.

use crate::analysis::{Proposal, finalize, prepare};
use crate::{Dispatch, DispatchContext, DispatchError, Dispatcher};
use mppq_ir::Graph;
use std::collections::HashMap;

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allin;

impl Dispatcher for Allin {
    fn name(&self) -> &str {
        "allin"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let mut proposals = HashMap::new();
        for id in &prep.order {
            let proposal = match prep.soi.get(id) {
                Some(r) => Proposal::Soi(r.clone()),
                None => Proposal::Quant("allin: every declared type is quantized".into()),
            };
            proposals.insert(*id, proposal);
        }
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}
