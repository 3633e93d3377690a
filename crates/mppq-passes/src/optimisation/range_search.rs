//! `range_search`: tries a range-searching observer for every per-tensor activation (the `mse`
//! observer searches each tensor's range for the least quantization error, `percentile` clips the
//! rarest values). The pipeline adds one pass per candidate (the `percentile` observer once per
//! percentile in the list: how much to clip depends on the model); the guard recalibrates with
//! each and keeps whichever gives the graph outputs the best SNR, so the result is the best of
//! min/max (the quantizer's choice) and the candidates, for this model and data.

use crate::error::Result;
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::slots::choose_observer;
use mppq_ir::quant::ObserverKind;
use mppq_ir::quant::{configured_slots, variable_of};
use serde::{Deserialize, Serialize};

/// The knobs of `range_search` (settings section `range_search`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RangeSearchSetting {
    /// On or off; absent: on from `optimize` level 1.
    pub enabled: Option<bool>,
    /// The observers to try, in order; absent: `percentile` at level 1 (one more calibration
    /// run), `mse` and `percentile` from level 2 (`mse` searches every tensor's range: slow).
    pub observers: Option<Vec<ObserverKind>>,
    /// The percentiles the `percentile` candidate is tried at, in order; absent:
    /// `calibration.percentile`, then 0.999995 (ONNX Runtime's `percentile=99.999`, which cuts
    /// half as much from each side). On the real-model corpus neither suits every model, and
    /// clipping more (0.9999) won on the calibration data of some models but lost on held-out
    /// data (`docs/real-models.md`).
    pub percentiles: Option<Vec<f64>>,
}

impl RangeSearchSetting {
    /// The observers tried at `optimize` level `level`.
    pub fn observers_at(&self, level: u8) -> Vec<ObserverKind> {
        match &self.observers {
            Some(list) => list.clone(),
            None if level >= 2 => vec![ObserverKind::Mse, ObserverKind::Percentile],
            None => vec![ObserverKind::Percentile],
        }
    }

    /// The candidates at `optimize` level `level`: each observer of [`Self::observers_at`], the
    /// `percentile` observer at each percentile (`calibration` = `calibration.percentile`).
    pub fn candidates_at(&self, level: u8, calibration: f64) -> Vec<RangeSearch> {
        let percentiles = self.percentiles.clone().unwrap_or_else(|| {
            let mut list = vec![calibration];
            if calibration != ORT_PERCENTILE {
                list.push(ORT_PERCENTILE);
            }
            list
        });
        let mut out = Vec::new();
        for observer in self.observers_at(level) {
            match observer {
                ObserverKind::Percentile => {
                    out.extend(percentiles.iter().map(|&p| RangeSearch { observer, percentile: Some(p) }))
                }
                _ => out.push(RangeSearch { observer, percentile: None }),
            }
        }
        out
    }
}

/// ONNX Runtime's default `percentile=99.999` in this crate's one-sided terms.
const ORT_PERCENTILE: f64 = 0.999995;

/// One candidate observer for every activation.
pub struct RangeSearch {
    pub observer: ObserverKind,
    /// The `percentile` observer's percentile for this candidate (`None`: the calibration's).
    pub percentile: Option<f64>,
}

impl Pass for RangeSearch {
    fn name(&self) -> &'static str {
        "range_search"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let activations: Vec<_> = configured_slots(ctx.graph)
            .into_iter()
            .filter(|loc| {
                variable_of(ctx.graph, *loc).and_then(|v| ctx.graph.variable(v).ok()).is_some_and(|v| !v.is_parameter())
            })
            .collect();
        // Softmax outputs keep the isotone observer an earlier pass chose.
        let locations: Vec<_> = activations
            .into_iter()
            .filter(|loc| {
                mppq_ir::quant::config_at(ctx.graph, *loc).is_some_and(|c| c.observer != ObserverKind::Isotone)
            })
            .collect();
        let mut changed = choose_observer(ctx.graph, &locations, self.observer);
        let at = match self.percentile {
            Some(p) => {
                if ctx.percentile != Some(p) {
                    // Read by `runtime_calibration`; the guard restores it with the graph on undo.
                    ctx.percentile = Some(p);
                    changed = locations.len();
                }
                format!(" at p = {p}")
            }
            None => String::new(),
        };
        Ok(PassReport::new(
            self.name(),
            changed,
            format!("{changed} activation configs use the `{}` observer{at}", self.observer),
        ))
    }
}
