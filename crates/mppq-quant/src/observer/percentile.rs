//! `percentile`: clips the range to the `p` and `1 − p` percentiles of the observed values
//! (default p = 0.99999), read from a two-pass signed histogram. ONNX Runtime's
//! `percentile=99.999` is p = 0.999995 here: it keeps 99.999 % of the values in all and cuts half
//! of the rest from each side.
//!
//! Definition (nearest rank): with N values sorted ascending, `k = ceil(p·N)`; the exact upper
//! percentile is `sorted[k − 1]`, the exact lower one `sorted[N − k]`. The observer returns the
//! right edge of the histogram bin holding rank k and the left edge of the bin holding rank
//! N − k + 1, so each bound is within one bin width `(max(max,0) − min(min,0)) / bins` of the
//! exact sort-based percentile and never clips more than it. Symmetric policies use
//! `max(|lower|, |upper|)`.

use super::range::params_for;
use super::two_pass::{Collector, HistMode, HistogramRule};
use super::{Histogram, ObserverOptions, check_bins};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

#[derive(Clone, Debug)]
pub struct PercentileObserver {
    collector: Collector,
    percentile: f64,
}

impl PercentileObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        check_bins("percentile", options.bins, 16..=65536)?;
        let p = options.percentile;
        if !(0.5..=1.0).contains(&p) {
            return Err(QuantError::InvalidOption {
                observer: "percentile".into(),
                message: format!("percentile {p} must be in [0.5, 1]"),
            });
        }
        Ok(Self {
            collector: Collector::new(variable, "percentile", config.channel_axis, HistMode::Signed, options.bins),
            percentile: p,
        })
    }

    /// The `(lower, upper)` percentile bounds read from each channel's histogram.
    pub fn bounds(&self) -> Result<Vec<(f64, f64)>> {
        Ok(self.collector.histograms()?.iter().map(|h| percentile_bounds(h, self.percentile)).collect())
    }
}

/// `(lower, upper)` bounds of one histogram (see the module doc).
pub fn percentile_bounds(h: &Histogram, p: f64) -> (f64, f64) {
    let n = h.total();
    if n == 0 {
        return (h.lo(), h.hi());
    }
    let k = ((p * n as f64).ceil() as u64).clamp(1, n);
    let first_bin_reaching = |rank: u64| {
        let mut acc = 0u64;
        for (i, c) in h.counts().iter().enumerate() {
            acc += c;
            if acc >= rank {
                return i;
            }
        }
        h.bins() - 1
    };
    let upper = h.edge(first_bin_reaching(k) + 1);
    let lower = h.edge(first_bin_reaching(n - k + 1));
    (lower, upper)
}

impl HistogramRule for PercentileObserver {
    fn collector(&self) -> &Collector {
        &self.collector
    }

    fn collector_mut(&mut self) -> &mut Collector {
        &mut self.collector
    }

    fn params(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>> {
        Ok(self.bounds()?.into_iter().map(|(lo, hi)| params_for(config, lo, hi)).collect())
    }
}
