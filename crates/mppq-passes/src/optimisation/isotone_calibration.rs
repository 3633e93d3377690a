//! `isotone_calibration`: Softmax outputs are calibrated with the isotone observer (PPQ's
//! `IsotoneCalibrationPass`), which picks the range that keeps each sample's largest class the
//! largest after quantization instead of the range that covers every value. What matters in a
//! classifier's or an attention's probabilities is their order, and min/max wastes levels on the
//! rare near-1 values. Only Softmax over the last axis (the isotone observer's class axis).

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::slots::choose_observer;
use mppq_ir::quant::ObserverKind;
use mppq_ir::quant::location::{input, output};
use serde::{Deserialize, Serialize};

/// The knobs of `isotone_calibration` (settings section `isotone_calibration`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IsotoneSetting {
    /// On or off; absent: on from `optimize` level 1.
    pub enabled: Option<bool>,
}

#[derive(Default)]
pub struct IsotoneCalibration;

impl Pass for IsotoneCalibration {
    fn name(&self) -> &'static str {
        "isotone_calibration"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let mut locations = Vec::new();
        let mut softmaxes = 0;
        // Before opset 13 Softmax flattens from `axis` (default 1): not a last-axis softmax.
        let opset = (ctx.opsets)("");
        for (id, op) in ctx.graph.operations() {
            let last_axis = opset >= 13 && op.attr_int("axis", -1).is_ok_and(|a| a == -1);
            if op.op_type != "Softmax" || !last_axis {
                continue;
            }
            let Some(Some(y)) = op.outputs().first().copied() else { continue };
            softmaxes += 1;
            locations.push(output(id, 0));
            for reader in ctx.graph.consumers(y) {
                let Ok(r) = ctx.graph.operation(*reader) else { continue };
                locations.extend(
                    r.inputs().iter().enumerate().filter(|(_, v)| **v == Some(y)).map(|(i, _)| input(*reader, i)),
                );
            }
        }
        let changed = choose_observer(ctx.graph, &locations, ObserverKind::Isotone);
        Ok(PassReport::new(
            self.name(),
            changed,
            format!("{changed} configs of {softmaxes} last-axis Softmax outputs use the isotone observer"),
        ))
    }
}
