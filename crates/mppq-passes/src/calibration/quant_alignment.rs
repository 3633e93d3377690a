//! `quant_alignment`: tensors that a runtime requires to share quantization parameters do.
//! Concat's inputs and output share one scale/offset (`align_to_output`: the output's;
//! `union_range`: one covering every input's and the output's range); the configs that
//! quantize the inputs (usually the producers' outputs) become dominated by the Concat output.
//! Outputs of relay ops (the role table's `OpClass::Relay`: MaxPool, Resize, reshapes, …; or the
//! types listed in `pooling_types`) are dominated by what quantizes their input (a
//! requantization-free pool). Add's activation inputs share the union of their
//! ranges when asked. Dominance is always set root to root, so no cycle can form; a group
//! whose configs quantize differently (bits, policy, per-channel) is left alone and counted.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::location::{input, output};
use mppq_ir::quant::{ConfigLocation, TensorQuantConfig, config_at, config_at_mut, dominator_root, sync_dominated};
use mppq_ir::{Graph, OpClass, Operation, op_roles};
use mppq_quant::observer::range::params_for;
use serde::{Deserialize, Serialize};

/// How Concat inputs and output are aligned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConcatMode {
    /// Every input takes the output's scale/offset.
    #[default]
    AlignToOutput,
    /// One scale/offset covering the union of the input and output ranges.
    UnionRange,
    /// No alignment.
    None,
}

pub struct QuantAlignment {
    pub concat: ConcatMode,
    /// Align Add's activation inputs to the union of their ranges.
    pub add: bool,
    /// Outputs of relay ops share their input's parameters.
    pub pooling: bool,
    /// The op types `pooling` aligns; `None`: every [`OpClass::Relay`] op of the role table.
    pub pooling_types: Option<Vec<String>>,
}

// Relay ops share the input's parameters by default: they only select or copy input values.
// Averaging pools are not relays on purpose: with equal input and output scales ONNX Runtime's
// QLinear(Global)AveragePool rounds the integer mean its own way, so sharing made ORT and the
// simulation disagree (tiny_cnn: −0.46 dB), and an average's narrower range deserves its own scale
// anyway (ResNet-18: 30.0 dB vs 29.4 dB with GlobalAveragePool shared).

impl Default for QuantAlignment {
    fn default() -> Self {
        Self { concat: ConcatMode::AlignToOutput, add: false, pooling: true, pooling_types: None }
    }
}

/// The real range a calibrated per-tensor config represents.
fn range_of(c: &TensorQuantConfig) -> Option<(f64, f64)> {
    let (s, o) = (f64::from(*c.scale.first()?), f64::from(*c.offset.first()?));
    Some(((c.quant_min as f64 - o) * s, (c.quant_max as f64 - o) * s))
}

/// The root configs quantizing the given input slots (distinct, in slot order).
fn input_roots(graph: &Graph, op: mppq_ir::OpId, slots: impl Iterator<Item = usize>) -> Result<Vec<ConfigLocation>> {
    let mut roots = Vec::new();
    for slot in slots {
        if config_at(graph, input(op, slot)).is_none() {
            continue;
        }
        let root = dominator_root(graph, input(op, slot)).in_pass("quant_alignment")?;
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    Ok(roots)
}

/// Makes every `member` root dominated by `master` (both roots), optionally widening the
/// master to the union of all their ranges. Returns whether the group was aligned.
fn share(graph: &mut Graph, master: ConfigLocation, members: &[ConfigLocation], union: bool) -> bool {
    let Some(m) = config_at(graph, master).cloned() else { return false };
    let group: Vec<TensorQuantConfig> = members.iter().filter_map(|l| config_at(graph, *l).cloned()).collect();
    let compatible = group.len() == members.len()
        && !m.policy.is_per_channel()
        && group.iter().all(|c| c.same_scheme(&m) && range_of(c).is_some())
        && range_of(&m).is_some();
    if !compatible {
        return false;
    }
    if union {
        let (mut lo, mut hi) = range_of(&m).unwrap_or_default();
        for c in &group {
            let (l, h) = range_of(c).unwrap_or_default();
            (lo, hi) = (lo.min(l), hi.max(h));
        }
        let (s, o) = params_for(&m, lo, hi);
        if let Some(mc) = config_at_mut(graph, master) {
            mc.scale = vec![s as f32];
            mc.offset = vec![o as f32];
        }
    }
    for loc in members {
        if *loc != master
            && let Some(c) = config_at_mut(graph, *loc)
        {
            c.dominated_by = Some(master);
        }
    }
    true
}

impl QuantAlignment {
    fn is_relay(&self, op: &Operation) -> bool {
        match &self.pooling_types {
            Some(types) => types.contains(&op.op_type),
            None => op_roles(op).is(OpClass::Relay),
        }
    }
}

impl Pass for QuantAlignment {
    fn name(&self) -> &'static str {
        "quant_alignment"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let graph = &mut *ctx.graph;
        let order = graph.topological_order().in_pass(self.name())?;
        let (mut aligned, mut skipped) = (0, 0);
        for id in order {
            let op = graph.operation(id).in_pass(self.name())?;
            if op.quant_config.is_none() || config_at(graph, output(id, 0)).is_none() {
                continue;
            }
            let inputs = op.inputs().len();
            let group = match op.op_type.as_str() {
                "Concat" if self.concat != ConcatMode::None => {
                    let master = dominator_root(graph, output(id, 0)).in_pass(self.name())?;
                    Some((master, input_roots(graph, id, 0..inputs)?, self.concat == ConcatMode::UnionRange))
                }
                _ if self.pooling && self.is_relay(op) => match input_roots(graph, id, 0..1)?.first() {
                    Some(master) => {
                        Some((*master, vec![dominator_root(graph, output(id, 0)).in_pass(self.name())?], false))
                    }
                    None => None,
                },
                "Add" if self.add => {
                    let activations: Vec<usize> = (0..inputs)
                        .filter(|i| {
                            let v = op.inputs()[*i].and_then(|v| graph.variable(v).ok());
                            v.is_some_and(|v| !v.is_parameter())
                        })
                        .collect();
                    let roots = input_roots(graph, id, activations.into_iter())?;
                    roots.first().copied().filter(|_| roots.len() > 1).map(|m| (m, roots, true))
                }
                _ => None,
            };
            let Some((master, members, union)) = group else { continue };
            if share(graph, master, &members, union) {
                aligned += 1;
            } else {
                skipped += 1;
            }
        }
        sync_dominated(graph).in_pass(self.name())?;
        Ok(PassReport::new(
            self.name(),
            aligned,
            format!("{aligned} operations aligned, {skipped} left alone (configs quantize differently)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::parameter_quantize::ParameterQuantize;
    use crate::calibration::runtime_calibration::RuntimeCalibration;
    use crate::structural::redundant_quant_simplify::RedundantQuantSimplify;
    use crate::test_graphs::{Harness, shared_input_concat_pool};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    fn calibrated() -> Harness {
        let mut h = Harness::new(shared_input_concat_pool());
        h.calibration("x", &[1, 2, 4, 4], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.run_pass(&mut RedundantQuantSimplify);
        h.run_pass(&mut ParameterQuantize::default());
        h.run_pass(&mut RuntimeCalibration::default());
        h
    }

    fn params(h: &Harness, loc: ConfigLocation) -> (f32, f32) {
        let c = h.config(loc);
        (c.scale[0], c.offset[0])
    }

    #[test]
    fn concat_inputs_take_the_output_parameters_and_pool_shares_its_input() {
        let mut h = calibrated();
        let (a, b, concat, pool) = (h.op("a"), h.op("b"), h.op("concat"), h.op("pool"));
        let out = params(&h, output(concat, 0));
        assert_ne!(params(&h, output(b, 0)), out, "sigmoid's own range differs before alignment");
        let report = h.run_pass(&mut QuantAlignment::default());
        assert_eq!(report.changed, 2, "{report}");
        for loc in [output(a, 0), output(b, 0), input(concat, 0), input(concat, 1), output(pool, 0)] {
            assert_eq!(params(&h, loc), out, "{loc:?}");
        }
        assert_eq!(h.config(output(a, 0)).dominated_by, Some(output(concat, 0)));
        assert_eq!(h.config(output(pool, 0)).dominated_by, Some(output(concat, 0)));
        // Simulation: the pooled output is on the Concat grid (multiples of its scale).
        let x = h.input("x", &[1, 2, 4, 4], 9.0);
        for v in h.run_sim(&x) {
            let q = v / out.0 + out.1;
            assert!((q - q.round()).abs() < 1e-3, "{v} is not on the grid of scale {}", out.0);
        }
    }

    #[test]
    fn union_range_covers_every_input() {
        let mut h = calibrated();
        let (a, concat) = (h.op("a"), h.op("concat"));
        // Pretend `a` saw a wider range than the Concat output: [0, 25.5].
        let ca = config_at_mut(&mut h.graph, output(a, 0)).unwrap();
        ca.scale = vec![0.1];
        ca.offset = vec![0.0];
        h.run_pass(&mut QuantAlignment { concat: ConcatMode::UnionRange, pooling: false, ..Default::default() });
        let (s, o) = params(&h, output(concat, 0));
        assert!((s - 0.1).abs() < 1e-7 && o == 0.0, "{s} {o}");
        assert_eq!(params(&h, output(a, 0)), (s, o));
    }

    #[test]
    fn add_inputs_share_the_union_of_their_ranges() {
        let mut h = Harness::new(crate::test_graphs::add_branches_clip());
        h.calibration("x", &[1, 2, 4, 4], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.run_pass(&mut RedundantQuantSimplify);
        h.run_pass(&mut RuntimeCalibration::default());
        let (a, b) = (h.op("a"), h.op("b"));
        let ranges = [output(a, 0), output(b, 0)].map(|l| range_of(h.config(l)).unwrap());
        let report = h.run_pass(&mut QuantAlignment { add: true, ..Default::default() });
        assert_eq!(report.changed, 1);
        let shared = h.config(output(a, 0)).clone();
        assert_eq!(h.config(output(b, 0)).dominated_by, Some(output(a, 0)));
        assert_eq!(h.config(output(b, 0)).scale, shared.scale);
        let (lo, hi) = range_of(&shared).unwrap();
        let (want_lo, want_hi) = (ranges[0].0.min(ranges[1].0), ranges[0].1.max(ranges[1].1));
        // Same range up to the rounding of the zero point (one step).
        let step = f64::from(shared.scale[0]);
        assert!((lo - want_lo).abs() <= step && (hi - want_hi).abs() <= step, "[{lo}, {hi}] vs [{want_lo}, {want_hi}]");
    }

    #[test]
    fn none_mode_leaves_concat_alone() {
        let mut h = calibrated();
        let b = h.op("b");
        let before = params(&h, output(b, 0));
        let report = h.run_pass(&mut QuantAlignment { concat: ConcatMode::None, pooling: false, ..Default::default() });
        assert_eq!((report.changed, params(&h, output(b, 0))), (0, before));
    }
}
