//! Which weights, scales and offsets of a quantized graph learn, found in one place for the two
//! trainers: quantization-aware training of a whole graph (`mppq_api::qat`) and block
//! reconstruction (this module's parent). [`Learnables::discover`] says what learns;
//! [`Learnables::sites`] maps every config of the graph to the learned scale it follows;
//! [`ScaleGroup::leaf`] makes a scale's trainable leaf from its calibrated parameters.
//!
//! The trainers differ in what they group, and each keeps its choice ([`Scope`]): QAT learns one
//! scale per configuration that owns one, and every float weight and bias of a quantized
//! operation; a reconstruction block learns one scale per activation tensor (every config on it
//! moves together, inside and outside the block), and the weight of each of its trainable
//! operations with that weight's own scale.

use super::tensors::tensor_configs;
use crate::error::{InPass, Result};
use crate::runtime::params::op_params;
use mppq_exec::Device;
use mppq_exec::simulation::training::{LearnableScale, QuantSite};
use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, TensorQuantConfig, config_at, dominator_root};
use mppq_ir::quant::{config_slots, variable_of};
use mppq_ir::{Graph, VarId, op_roles};
use std::collections::HashMap;

/// What to look for.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Quantization-aware training of a whole graph: with `weights`, every float initializer in a
    /// weight or bias slot of an operation whose config on it is active; with `scales`, the scale
    /// of every config that [learns one](learns_scale) and has one.
    Graph { weights: bool, scales: bool },
    /// A reconstruction block, `graph` cut out of `whole`: the weight of each operation of `ops`
    /// (trainable ones: their weight config is activated and integer) whose values learn (as
    /// float or as rounding) with `weights`, whose own scale learns with `weight_scales` (unless
    /// it follows another config); with `activation_scales`, one scale per activation tensor
    /// whose configs, in the block and in `whole`, all quantize it alike, its offset too with
    /// `offsets` where the config is asymmetric.
    Block {
        ops: &'a [String],
        whole: &'a Graph,
        weights: bool,
        weight_scales: bool,
        activation_scales: bool,
        offsets: bool,
    },
}

/// A weight (or bias) whose values learn: the variable and the config that quantizes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnableWeight {
    pub var: VarId,
    pub config: ConfigLocation,
}

/// A learned scale and the configs that take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleGroup {
    /// The config whose calibrated scale (and offset) the leaf starts from.
    pub seed: ConfigLocation,
    /// The configs the learned values are written to (the seed among them).
    pub configs: Vec<ConfigLocation>,
    /// Whether the offset learns too (LSQ+).
    pub offset: bool,
}

impl ScaleGroup {
    /// A trainable leaf on `device` starting from the seed's scale (and offset); `None` when the
    /// seed has no config in `graph`.
    pub fn leaf(&self, graph: &Graph, device: &Device) -> Option<LearnableScale> {
        let c = config_at(graph, self.seed)?;
        let leaf = LearnableScale::new(c.scale.clone(), device);
        Some(if self.offset { leaf.with_offset(c.offset.clone(), device) } else { leaf })
    }
}

/// What learns in a quantized graph, in discovery order (operations in graph order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learnables {
    pub weights: Vec<LearnableWeight>,
    pub scales: Vec<ScaleGroup>,
}

/// Whether a config's scale can learn: activated (calibrated, simulated), not following another
/// config's parameters, and integer (a floating format has no grid step to learn).
pub fn learns_scale(c: &TensorQuantConfig) -> bool {
    c.state == QuantizationState::Activated && c.dominated_by.is_none() && !c.policy.is_floating()
}

impl Learnables {
    /// What learns in `graph` within `scope`.
    pub fn discover(graph: &Graph, scope: Scope<'_>) -> Result<Self> {
        match scope {
            Scope::Graph { weights, scales } => Self::of_graph(graph, weights, scales),
            Scope::Block { ops, whole, weights, weight_scales, activation_scales, offsets } => {
                let mut found = Self::of_block_weights(graph, ops, weights, weight_scales)?;
                if activation_scales {
                    found.scales.extend(activation_groups(graph, whole, offsets));
                }
                Ok(found)
            }
        }
    }

    fn of_graph(graph: &Graph, weights: bool, scales: bool) -> Result<Self> {
        let mut found = Self::default();
        for (id, op) in graph.operations() {
            let Some(cfg) = op.quant_config.as_ref() else { continue };
            let roles = op_roles(op);
            if weights {
                for slot in roles.weight_slots().map(|(s, _, _)| s).chain(roles.bias()) {
                    let Some(Some(var)) = op.inputs().get(slot).copied() else { continue };
                    let value = graph.variable(var).in_pass("learnables")?.value.as_ref();
                    if value.is_none_or(|v| !v.dtype().is_float())
                        || cfg.input_configs.get(slot).and_then(Option::as_ref).is_none_or(|c| !c.state.is_active())
                        || found.weights.iter().any(|w| w.var == var)
                    {
                        continue;
                    }
                    let config = ConfigLocation { op: id, side: ConfigSide::Input, index: slot };
                    found.weights.push(LearnableWeight { var, config });
                }
            }
            if scales {
                for (side, configs) in
                    [(ConfigSide::Input, &cfg.input_configs), (ConfigSide::Output, &cfg.output_configs)]
                {
                    for (index, c) in configs.iter().enumerate() {
                        let Some(c) = c else { continue };
                        if learns_scale(c) && !c.scale.is_empty() {
                            let loc = ConfigLocation { op: id, side, index };
                            found.scales.push(ScaleGroup { seed: loc, configs: vec![loc], offset: false });
                        }
                    }
                }
            }
        }
        Ok(found)
    }

    fn of_block_weights(graph: &Graph, ops: &[String], weights: bool, weight_scales: bool) -> Result<Self> {
        let mut found = Self::default();
        for name in ops {
            let Some(id) = graph.op_id(name) else { continue };
            let Some(weight) = op_params(graph, id)?.weight else { continue };
            let op = graph.operation(id).in_pass("learnables")?;
            let Some((slot, _, _)) = op_roles(op).weight() else { continue };
            let loc = ConfigLocation { op: id, side: ConfigSide::Input, index: slot };
            let Some(config) = config_at(graph, loc) else { continue };
            if weights {
                found.weights.push(LearnableWeight { var: weight.var, config: loc });
            }
            if weight_scales && config.dominated_by.is_none() {
                found.scales.push(ScaleGroup { seed: loc, configs: vec![loc], offset: false });
            }
        }
        Ok(found)
    }

    /// Every config of `graph` that takes a learned scale, its own or its dominator root's: the
    /// simulation's site and the index in [`Self::scales`], in graph order.
    pub fn sites(&self, graph: &Graph) -> Vec<(QuantSite, usize)> {
        let group_of: HashMap<ConfigLocation, usize> =
            self.scales.iter().enumerate().flat_map(|(i, g)| g.configs.iter().map(move |l| (*l, i))).collect();
        config_slots(graph)
            .into_iter()
            .filter_map(|loc| {
                let root = dominator_root(graph, loc).ok()?;
                Some(((loc.op, loc.side, loc.index), *group_of.get(&root)?))
            })
            .collect()
    }
}

/// One group per activation tensor of the block `graph`: every active config on it (the
/// producer's output, the readers' inputs, inside and outside the block) quantizes it with the
/// same parameters, and must keep doing so, or the simulation would quantize twice where an
/// export writes one Q/DQ pair.
fn activation_groups(graph: &Graph, whole: &Graph, offsets: bool) -> Vec<ScaleGroup> {
    let mut groups = Vec::new();
    let mut seen: Vec<VarId> = Vec::new();
    for loc in config_slots(graph) {
        let Some(c) = config_at(graph, loc) else { continue };
        let Some(var) = variable_of(graph, loc) else { continue };
        let is_param = graph.variable(var).is_ok_and(|v| v.value.is_some());
        if seen.contains(&var) || is_param || !learns_scale(c) {
            continue;
        }
        seen.push(var);
        let Some(full_var) = whole.var_id(graph.var_name(var)) else { continue };
        if tensor_configs(whole, full_var, c).is_none() {
            continue; // configs on it quantize differently (or are dominated from elsewhere)
        }
        let Some(configs) = tensor_configs(graph, var, c) else { continue };
        groups.push(ScaleGroup { seed: loc, configs, offset: offsets && !c.policy.is_symmetric() });
    }
    groups
}
