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
