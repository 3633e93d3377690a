//! `mixed_range_concat`: a Concat that joins tensors of very different ranges stays float. The
//! case is a detection head: YOLOv8 concatenates decoded boxes (0–640 px) with class
//! probabilities (0–1), and one 8-bit scale over the joined tensor leaves the probabilities a
//! few levels or none (peers keep 0–86 % of the float detections there). Read from the
//! calibrated ranges: when the widest input range is `ratio` times the narrowest or more, the
//! Concat and the relays after it (Reshape, Transpose, …, whose output is the same values) lose
//! their configs, so each input keeps the scale its producer quantizes it with and the joined
//! tensor stays float; a computing op reading it takes it as a float input. Runs after
//! calibration and before alignment (which would otherwise give every input the joined range).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::{ConfigLocation, ConfigSide, TargetPrecision, config_at, dominator_root};
use mppq_ir::{Graph, OpClass, OpId, op_roles};
use serde::{Deserialize, Serialize};

/// The knobs of `mixed_range_concat` (settings section `mixed_range_concat`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MixedRangeConcatSetting {
    /// On or off; absent: on from `optimize` level 1.
    pub enabled: Option<bool>,
    /// Widest over narrowest input range from which the Concat stays float (16: the narrowest
    /// input would lose 4 of its 8 bits to the shared scale).
    pub ratio: f32,
}

impl Default for MixedRangeConcatSetting {
    fn default() -> Self {
        Self { enabled: None, ratio: 16.0 }
    }
}

pub struct MixedRangeConcat {
    pub setting: MixedRangeConcatSetting,
}

/// The calibrated range (max − min) of the value a config quantizes, through dominance.
fn range_at(graph: &Graph, loc: ConfigLocation) -> Option<f32> {
    let root = dominator_root(graph, loc).ok()?;
    let c = config_at(graph, root)?;
    let scale = c.scale.iter().copied().fold(0f32, f32::max);
    (c.state.is_active() && scale > 0.0).then(|| scale * (c.quant_max - c.quant_min) as f32)
}

impl MixedRangeConcat {
    /// (widest, narrowest) input range of a Concat, when it has two quantized inputs or more.
    fn spread(graph: &Graph, id: OpId) -> Option<(f32, f32)> {
        let op = graph.operation(id).ok()?;
        let ranges: Vec<f32> = (0..op.inputs().len())
            .filter_map(|index| range_at(graph, ConfigLocation { op: id, side: ConfigSide::Input, index }))
            .collect();
        (ranges.len() >= 2).then(|| {
            (ranges.iter().copied().fold(0f32, f32::max), ranges.iter().copied().fold(f32::INFINITY, f32::min))
        })
    }

    /// Takes the configs off `id` and off the relays that carry its output on; a computing op
    /// reading the float tensor keeps its other configs but reads it in float.
    fn keep_float(graph: &mut Graph, id: OpId) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut stack = vec![id];
        while let Some(op_id) = stack.pop() {
            let op = graph.operation_mut(op_id).in_pass("mixed_range_concat")?;
            op.quant_config = None;
            op.precision = TargetPrecision::Fp32;
            names.push(op.name.clone());
            let outputs: Vec<_> = op.outputs().iter().flatten().copied().collect();
            for y in outputs {
                for reader in graph.consumers(y).to_vec() {
                    let r = graph.operation(reader).in_pass("mixed_range_concat")?;
                    if r.quant_config.is_none() {
                        continue;
                    }
                    let roles = op_roles(r);
                    if roles.is(OpClass::Relay) {
                        stack.push(reader);
                        continue;
                    }
                    let slots: Vec<usize> =
                        r.inputs().iter().enumerate().filter(|(_, v)| **v == Some(y)).map(|(i, _)| i).collect();
                    let r = graph.operation_mut(reader).in_pass("mixed_range_concat")?;
                    let Some(qc) = r.quant_config.as_mut() else { continue };
                    for slot in slots {
                        if let Some(c) = qc.input_configs.get_mut(slot) {
                            *c = None;
                        }
                    }
                    // A bias derived from the input scale has none to derive from now.
                    for (slot, c) in qc.input_configs.iter_mut().enumerate() {
                        if roles.input(slot) == mppq_ir::InputRole::Bias {
                            *c = None;
                        }
                    }
                }
            }
        }
        Ok(names)
    }
}

impl Pass for MixedRangeConcat {
    fn name(&self) -> &'static str {
        "mixed_range_concat"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let concats: Vec<OpId> = ctx
            .graph
            .operations()
            .filter(|(_, op)| op.op_type == "Concat" && op.in_default_domain() && op.quant_config.is_some())
            .map(|(id, _)| id)
            .collect();
        let mut lines = Vec::new();
        for id in concats {
            let Some((widest, narrowest)) = Self::spread(ctx.graph, id) else { continue };
            if widest < self.setting.ratio * narrowest {
                continue;
            }
            let names = Self::keep_float(ctx.graph, id)?;
            lines.push(format!(
                "`{}`: input ranges {narrowest:.3} … {widest:.3} ({:.0}×), kept float with {} relay(s) after it",
                names[0],
                widest / narrowest,
                names.len() - 1
            ));
        }
        let summary = if lines.is_empty() {
            format!("no Concat joins ranges {}× apart", self.setting.ratio)
        } else {
            format!("{} Concat kept float (each input keeps its own scale): {}", lines.len(), lines.join("; "))
        };
        Ok(PassReport::new(self.name(), lines.len(), summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, graph_with_input, init, snr_db, unary, var};
    use mppq_ir::{Attribute, Operation};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    /// x → Sigmoid → scores (0–1); x → Mul(300) → boxes (±450): Concat(boxes, scores) → y, as a
    /// detection head joins decoded boxes and class probabilities.
    fn head() -> mppq_ir::Graph {
        let (mut g, x) = graph_with_input("x");
        let scores = unary(&mut g, "Sigmoid", "sigmoid", x);
        let k = init(&mut g, "k", &[1], 7, 1.0);
        g.variable_mut(k).unwrap().value = Some(mppq_ir::TensorData::from_vec(vec![1], &[300.0f32]).unwrap());
        let boxes = var(&mut g, "boxes");
        g.add_operation(Operation::new("Mul", "scale"), &[Some(x), Some(k)], &[Some(boxes)]).unwrap();
        let y = var(&mut g, "y");
        let concat = Operation::new("Concat", "concat").with_attr("axis", Attribute::Int(1));
        g.add_operation(concat, &[Some(boxes), Some(scores)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        g
    }

    fn scores_snr(enabled: bool) -> (f64, Vec<PassReport>) {
        let mut h = Harness::new(head());
        h.calibration("x", &[1, 8], 4);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let setting = crate::PipelineSetting {
            mixed_range_concat: MixedRangeConcatSetting { enabled: Some(enabled), ..Default::default() },
            ..Default::default()
        };
        let reports = h.pipeline(&setting);
        let feeds = h.input("x", &[1, 8], 9.5);
        let (float, sim) = (h.run_fp32(&feeds), h.run_sim(&feeds));
        (snr_db(&float[8..], &sim[8..]), reports)
    }

    #[test]
    fn a_concat_of_boxes_and_scores_stays_float_and_keeps_the_scores() {
        let (on, reports) = scores_snr(true);
        let report = reports.iter().find(|r| r.pass == "mixed_range_concat").unwrap();
        assert_eq!(report.changed, 1, "{report}");
        assert!(report.summary.contains("`concat`"), "{report}");
        let (off, _) = scores_snr(false);
        // One 8-bit scale over ±450 leaves the 0–1 scores ~0.5 levels: noise.
        assert!(on > 35.0 && off < 10.0, "scores SNR with the pass {on:.1} dB, without {off:.1} dB");
    }
}
