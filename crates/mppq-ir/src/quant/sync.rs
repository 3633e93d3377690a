//! Dominance links between tensor configs: finding a config by its location, following
//! `dominated_by` chains to the config that owns the parameters, and copying those parameters
//! into every dominated config so simulation and export can read each config's own fields.

use super::{ConfigLocation, ConfigSide, QuantizationState, TensorQuantConfig};
use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId};

/// The config at `loc`, if the operation exists and has a config in that slot.
pub fn config_at(graph: &Graph, loc: ConfigLocation) -> Option<&TensorQuantConfig> {
    let cfg = graph.operation(loc.op).ok()?.quant_config.as_ref()?;
    let slots = match loc.side {
        ConfigSide::Input => &cfg.input_configs,
        ConfigSide::Output => &cfg.output_configs,
    };
    slots.get(loc.index)?.as_ref()
}

/// Mutable access to the config at `loc`.
pub fn config_at_mut(graph: &mut Graph, loc: ConfigLocation) -> Option<&mut TensorQuantConfig> {
    let cfg = graph.operation_mut(loc.op).ok()?.quant_config.as_mut()?;
    let slots = match loc.side {
        ConfigSide::Input => &mut cfg.input_configs,
        ConfigSide::Output => &mut cfg.output_configs,
    };
    slots.get_mut(loc.index)?.as_mut()
}

fn describe(graph: &Graph, loc: ConfigLocation) -> String {
    let op =
        graph.operation(loc.op).map(|o| format!("`{}` ({})", o.name, o.op_type)).unwrap_or(format!("#{}", loc.op.0));
    let side = match loc.side {
        ConfigSide::Input => "input",
        ConfigSide::Output => "output",
    };
    format!("{side} {} of {op}", loc.index)
}

/// Follows `dominated_by` from `loc` to the config that is dominated by nothing (the one whose
/// parameters are shared). A missing config or a cycle is an error naming the configs.
pub fn dominator_root(graph: &Graph, loc: ConfigLocation) -> Result<ConfigLocation> {
    let mut current = loc;
    let mut seen = vec![loc];
    loop {
        let config = config_at(graph, current).ok_or_else(|| {
            IrError::InvalidQuantConfig(format!(
                "{} is named as a dominating config but has none (dominance starting at {})",
                describe(graph, current),
                describe(graph, loc)
            ))
        })?;
        let Some(next) = config.dominated_by else { return Ok(current) };
        if seen.contains(&next) {
            let chain: Vec<String> = seen.iter().chain([&next]).map(|l| describe(graph, *l)).collect();
            return Err(IrError::InvalidQuantConfig(format!("dominance cycle: {}", chain.join(" -> "))));
        }
        seen.push(next);
        current = next;
    }
}

/// Copies the scale and offset of each dominating config into every config it dominates
/// (directly or through a chain). A dominated config still `Initial` becomes `Activated` once
/// its dominator has parameters. Returns how many configs were updated.
pub fn sync_dominated(graph: &mut Graph) -> Result<usize> {
    let mut dominated = Vec::new();
    let ops: Vec<OpId> = graph.operations().map(|(id, _)| id).collect();
    for op in ops {
        let Some(cfg) = graph.operation(op)?.quant_config.as_ref() else { continue };
        for (side, slots) in [(ConfigSide::Input, &cfg.input_configs), (ConfigSide::Output, &cfg.output_configs)] {
            for (index, c) in slots.iter().enumerate() {
                if c.as_ref().is_some_and(|c| c.dominated_by.is_some()) {
                    dominated.push(ConfigLocation { op, side, index });
                }
            }
        }
    }
    let mut updated = 0;
    for loc in dominated {
        let root = dominator_root(graph, loc)?;
        let Some(source) = config_at(graph, root) else { continue };
        if source.scale.is_empty() {
            continue;
        }
        let (scale, offset) = (source.scale.clone(), source.offset.clone());
        if let Some(target) = config_at_mut(graph, loc) {
            target.scale = scale;
            target.offset = offset;
            if target.state == QuantizationState::Initial {
                target.state = QuantizationState::Activated;
            }
            updated += 1;
        }
    }
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Operation, Variable};
    use crate::quant::OperationQuantConfig;

    /// x → Relu a → y → Relu b → z, every slot with a per-tensor uint8 config.
    fn chain() -> (Graph, OpId, OpId) {
        let mut g = Graph::new("g");
        let [x, y, z] = ["x", "y", "z"].map(|n| g.add_variable(Variable::new(n)).unwrap());
        let a = g.add_operation(Operation::new("Relu", "a"), &[Some(x)], &[Some(y)]).unwrap();
        let b = g.add_operation(Operation::new("Relu", "b"), &[Some(y)], &[Some(z)]).unwrap();
        for op in [a, b] {
            let c = TensorQuantConfig::linear(8, false, None).unwrap();
            g.operation_mut(op).unwrap().quant_config =
                Some(OperationQuantConfig { input_configs: vec![Some(c.clone())], output_configs: vec![Some(c)] });
        }
        (g, a, b)
    }

    #[test]
    fn chains_copy_the_root_parameters() {
        let (mut g, a, b) = chain();
        let a_out = ConfigLocation { op: a, side: ConfigSide::Output, index: 0 };
        let b_in = ConfigLocation { op: b, side: ConfigSide::Input, index: 0 };
        let b_out = ConfigLocation { op: b, side: ConfigSide::Output, index: 0 };
        let root = config_at_mut(&mut g, a_out).unwrap();
        root.scale = vec![0.5];
        root.offset = vec![3.0];
        root.state = QuantizationState::Activated;
        let bi = config_at_mut(&mut g, b_in).unwrap();
        bi.dominated_by = Some(a_out);
        bi.state = QuantizationState::Overlapped;
        config_at_mut(&mut g, b_out).unwrap().dominated_by = Some(b_in);

        assert_eq!(dominator_root(&g, b_out).unwrap(), a_out);
        assert_eq!(sync_dominated(&mut g).unwrap(), 2);
        let bi = config_at(&g, b_in).unwrap();
        assert_eq!(
            (bi.scale.clone(), bi.offset.clone(), bi.state),
            (vec![0.5], vec![3.0], QuantizationState::Overlapped)
        );
        let bo = config_at(&g, b_out).unwrap();
        assert_eq!(
            (bo.scale.clone(), bo.offset.clone(), bo.state),
            (vec![0.5], vec![3.0], QuantizationState::Activated)
        );
    }

    #[test]
    fn cycles_and_dangling_links_are_errors() {
        let (mut g, a, b) = chain();
        let a_out = ConfigLocation { op: a, side: ConfigSide::Output, index: 0 };
        let b_in = ConfigLocation { op: b, side: ConfigSide::Input, index: 0 };
        config_at_mut(&mut g, a_out).unwrap().dominated_by = Some(b_in);
        config_at_mut(&mut g, b_in).unwrap().dominated_by = Some(a_out);
        let err = sync_dominated(&mut g).unwrap_err().to_string();
        assert!(err.contains("dominance cycle") && err.contains("`a` (Relu)"), "{err}");

        config_at_mut(&mut g, a_out).unwrap().dominated_by =
            Some(ConfigLocation { op: b, side: ConfigSide::Output, index: 7 });
        let err = dominator_root(&g, a_out).unwrap_err().to_string();
        assert!(err.contains("output 7 of `b` (Relu)"), "{err}");
    }
}
