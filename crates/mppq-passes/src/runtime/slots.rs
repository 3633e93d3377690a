//! Helpers the passes share to walk config slots: locations, the variable a slot reads or
//! writes, and whether two configs quantize a tensor identically.

use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, TensorQuantConfig};
use mppq_ir::{Graph, OpId, VarId};

pub fn input(op: OpId, index: usize) -> ConfigLocation {
    ConfigLocation { op, side: ConfigSide::Input, index }
}

pub fn output(op: OpId, index: usize) -> ConfigLocation {
    ConfigLocation { op, side: ConfigSide::Output, index }
}

/// The variable behind a config slot.
pub fn variable_of(graph: &Graph, loc: ConfigLocation) -> Option<VarId> {
    let op = graph.operation(loc.op).ok()?;
    let vars = match loc.side {
        ConfigSide::Input => op.inputs(),
        ConfigSide::Output => op.outputs(),
    };
    *vars.get(loc.index)?
}

/// Every config slot that holds a config, in operation order.
pub fn all_configs(graph: &Graph) -> Vec<ConfigLocation> {
    let mut out = Vec::new();
    for (op, o) in graph.operations() {
        let Some(cfg) = &o.quant_config else { continue };
        for (side, slots) in [(ConfigSide::Input, &cfg.input_configs), (ConfigSide::Output, &cfg.output_configs)] {
            out.extend(slots.iter().enumerate().filter(|(_, c)| c.is_some()).map(|(index, _)| ConfigLocation {
                op,
                side,
                index,
            }));
        }
    }
    out
}

/// Whether a config (still) quantizes its tensor itself: calibrated or about to be.
pub fn quantizes(c: &TensorQuantConfig) -> bool {
    matches!(c.state, QuantizationState::Initial | QuantizationState::Activated | QuantizationState::Passive)
}

/// Gives every still-uncalibrated, per-tensor, integer config at `locations` the observer `kind`; returns
/// how many changed (observer-choosing passes: `isotone_calibration`, `range_search`).
pub fn choose_observer(graph: &mut Graph, locations: &[ConfigLocation], kind: mppq_ir::quant::ObserverKind) -> usize {
    let mut changed = 0;
    for loc in locations {
        if let Some(c) = mppq_ir::quant::config_at_mut(graph, *loc)
            && c.state == QuantizationState::Initial
            && c.channel_axis.is_none()
            && !c.policy.is_floating()
            && c.observer != kind
        {
            c.observer = kind;
            changed += 1;
        }
    }
    changed
}
