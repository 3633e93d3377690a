//! Which configs quantize one tensor, so a learned scale moves all of them together.

use mppq_ir::quant::{ConfigLocation, ConfigSide, TensorQuantConfig, config_at, dominator_root};
use mppq_ir::{Graph, VarId};

/// The variable a config quantizes.
pub(super) fn config_var(graph: &Graph, loc: ConfigLocation) -> Option<VarId> {
    let op = graph.operation(loc.op).ok()?;
    let vars = match loc.side {
        ConfigSide::Input => op.inputs(),
        ConfigSide::Output => op.outputs(),
    };
    vars.get(loc.index).copied().flatten()
}

/// The active, undominated configs on `var` (its producer's output and its readers' inputs),
/// when every one of them quantizes it with `like`'s scale and offset; `None` when one differs or
/// when a config on it follows a config on another tensor.
pub(super) fn tensor_configs(graph: &Graph, var: VarId, like: &TensorQuantConfig) -> Option<Vec<ConfigLocation>> {
    let mut locs = Vec::new();
    let producer = graph.producer(var).into_iter().flat_map(|p| {
        let slots = graph.operation(p).map(|o| o.outputs().to_vec()).unwrap_or_default();
        slots.into_iter().enumerate().filter(move |(_, v)| *v == Some(var)).map(move |(index, _)| ConfigLocation {
            op: p,
            side: ConfigSide::Output,
            index,
        })
    });
    let readers = graph.consumers(var).iter().flat_map(|&r| {
        let slots = graph.operation(r).map(|o| o.inputs().to_vec()).unwrap_or_default();
        slots.into_iter().enumerate().filter(move |(_, v)| *v == Some(var)).map(move |(index, _)| ConfigLocation {
            op: r,
            side: ConfigSide::Input,
            index,
        })
    });
    for loc in producer.chain(readers).collect::<Vec<_>>() {
        let Some(c) = config_at(graph, loc) else { continue };
        if c.dominated_by.is_some() {
            // Shared with a config on another tensor (a Concat's inputs and output, say): a
            // scale learned here would quantize this tensor twice, differently.
            let root = dominator_root(graph, loc).ok()?;
            if config_var(graph, root) != Some(var) {
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

/// Every config location of the graph's operations.
pub(super) fn config_sites(graph: &Graph) -> Vec<ConfigLocation> {
    let mut out = Vec::new();
    for (op, o) in graph.operations() {
        let Some(c) = o.quant_config.as_ref() else { continue };
        for (side, n) in [(ConfigSide::Input, c.input_configs.len()), (ConfigSide::Output, c.output_configs.len())] {
            out.extend((0..n).map(|index| ConfigLocation { op, side, index }));
        }
    }
    out
}
