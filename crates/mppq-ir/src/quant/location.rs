//! Where configs sit: the location of an input or output slot ([`input`], [`output`]), the
//! variable a slot reads or writes ([`variable_of`]), and the slots of a graph or of one tensor.
//! Beside [`super::config_at`], which finds the config at a location.

use super::{ConfigLocation, ConfigSide};
use crate::graph::{Graph, OpId, VarId};

/// The location of input slot `index` of `op`.
pub fn input(op: OpId, index: usize) -> ConfigLocation {
    ConfigLocation { op, side: ConfigSide::Input, index }
}

/// The location of output slot `index` of `op`.
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
    vars.get(loc.index).copied().flatten()
}

/// Every slot that holds a config, in operation order (inputs, then outputs).
pub fn configured_slots(graph: &Graph) -> Vec<ConfigLocation> {
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

/// Every slot of every operation that carries a config, configured or not, in operation order.
pub fn config_slots(graph: &Graph) -> Vec<ConfigLocation> {
    let mut out = Vec::new();
    for (op, o) in graph.operations() {
        let Some(c) = o.quant_config.as_ref() else { continue };
        for (side, n) in [(ConfigSide::Input, c.input_configs.len()), (ConfigSide::Output, c.output_configs.len())] {
            out.extend((0..n).map(|index| ConfigLocation { op, side, index }));
        }
    }
    out
}

/// The slots that quantize tensor `var`: its producer's outputs, then each reader's inputs.
pub fn tensor_slots(graph: &Graph, var: VarId) -> Vec<ConfigLocation> {
    let mut slots = Vec::new();
    if let Some(producer) = graph.producer(var)
        && let Ok(op) = graph.operation(producer)
    {
        let outputs = op.outputs().iter().enumerate().filter(|(_, v)| **v == Some(var));
        slots.extend(outputs.map(|(index, _)| output(producer, index)));
    }
    for &reader in graph.consumers(var) {
        if let Ok(op) = graph.operation(reader) {
            let inputs = op.inputs().iter().enumerate().filter(|(_, v)| **v == Some(var));
            slots.extend(inputs.map(|(index, _)| input(reader, index)));
        }
    }
    slots
}
