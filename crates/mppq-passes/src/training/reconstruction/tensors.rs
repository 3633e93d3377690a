//! Which configs quantize one tensor, so a learned scale moves all of them together.

use mppq_ir::quant::{ConfigLocation, TensorQuantConfig, config_at, dominator_root, tensor_slots, variable_of};
use mppq_ir::{Graph, VarId};

/// The active, undominated configs on `var` (its producer's output and its readers' inputs),
/// when every one of them quantizes it with `like`'s scale and offset; `None` when one differs or
/// when a config on it follows a config on another tensor.
pub(super) fn tensor_configs(graph: &Graph, var: VarId, like: &TensorQuantConfig) -> Option<Vec<ConfigLocation>> {
    let mut locs = Vec::new();
    for loc in tensor_slots(graph, var) {
        let Some(c) = config_at(graph, loc) else { continue };
        if c.dominated_by.is_some() {
            // Shared with a config on another tensor (a Concat's inputs and output, say): a
            // scale learned here would quantize this tensor twice, differently.
            let root = dominator_root(graph, loc).ok()?;
            if variable_of(graph, root) != Some(var) {
                return None;
            }
            continue;
        }
        if !c.state.is_active() {
            continue;
        }
        if c.scale != like.scale || c.offset != like.offset || c.quant_min != like.quant_min {
            return None;
        }
        locs.push(loc);
    }
    Some(locs)
}
