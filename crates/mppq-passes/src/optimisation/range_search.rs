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
    /// `percentile` observer at each percentile (`calibration` = `calibration.percentile`);
    /// `histogram_bins` is `calibration.bins`.
    pub fn candidates_at(&self, level: u8, calibration: f64, histogram_bins: usize) -> Vec<RangeSearch> {
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
                ObserverKind::Percentile => out.extend(percentiles.iter().map(|&p| RangeSearch {
                    observer,
                    percentile: Some(p),
                    histogram_bins,
                })),
                _ => out.push(RangeSearch { observer, percentile: None, histogram_bins }),
            }
        }
        out
    }
}

/// The activation configs a candidate observer is put on: every non-parameter config but the
/// Softmax outputs that keep the isotone observer an earlier pass chose.
fn searched_locations(graph: &mppq_ir::Graph) -> Vec<mppq_ir::quant::ConfigLocation> {
    configured_slots(graph)
        .into_iter()
        .filter(|loc| variable_of(graph, *loc).and_then(|v| graph.variable(v).ok()).is_some_and(|v| !v.is_parameter()))
        .filter(|loc| mppq_ir::quant::config_at(graph, *loc).is_some_and(|c| c.observer != ObserverKind::Isotone))
        .collect()
}

/// Why histograms of `bins` bins for every searched activation do not fit the tensor budget
/// (they are held at once, the observers' and the shared cache's copies: a graph of 100 000
/// operations asked for gigabytes and aborted); `None` when they fit. Range search skips such
/// candidates and calibration does not prefetch histograms for them, saying so.
pub fn histograms_over_budget(graph: &mppq_ir::Graph, bins: usize) -> Option<String> {
    histograms_over_budget_for(searched_locations(graph).len(), bins)
}

/// [`histograms_over_budget`] for `configs` searched activation configs.
fn histograms_over_budget_for(configs: usize, bins: usize) -> Option<String> {
    let configs = configs as u64;
    let bytes = configs.saturating_mul(bins as u64 * 8 * 2);
    let budget = mppq_exec::budget::max_tensor_bytes();
    (bytes > budget).then(|| {
        format!(
            "{configs} activation configs × {bins} bins would hold {} MiB of histograms, over the {} MiB budget \
             (lower calibration.bins, or raise max_tensor_mib)",
            bytes >> 20,
            budget >> 20
        )
    })
}

/// ONNX Runtime's default `percentile=99.999` in this crate's one-sided terms.
const ORT_PERCENTILE: f64 = 0.999995;

/// One candidate observer for every activation.
pub struct RangeSearch {
    pub observer: ObserverKind,
    /// The `percentile` observer's percentile for this candidate (`None`: the calibration's).
    pub percentile: Option<f64>,
    /// Bins of the calibration's histograms (`calibration.bins`), for the memory check.
    pub histogram_bins: usize,
}

impl Pass for RangeSearch {
    fn name(&self) -> &'static str {
        "range_search"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let locations = searched_locations(ctx.graph);
        if mppq_quant::observer::collects_signed_histogram(self.observer)
            && let Some(why) = histograms_over_budget_for(locations.len(), self.histogram_bins)
        {
            return Ok(PassReport::new(self.name(), 0, format!("not tried: {why}")));
        }
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
