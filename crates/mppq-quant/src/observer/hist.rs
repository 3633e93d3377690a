//! `hist`: plain two-pass histogram collection (signed values, per channel) for analysis; its
//! finalize is minmax's, from the pass-0 ranges.

use super::minmax::params_from_ranges;
use super::two_pass::{Collector, HistMode, HistogramRule};
use super::{Histogram, ObserverOptions, check_bins};
use crate::error::Result;
use mppq_ir::quant::TensorQuantConfig;

#[derive(Clone, Debug)]
pub struct HistObserver {
    collector: Collector,
}

impl HistObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        check_bins("hist", options.bins, 16..=65536)?;
        Ok(Self { collector: Collector::new(variable, "hist", config.channel_axis, HistMode::Signed, options.bins) })
    }

    /// The per-channel histograms (after pass 1).
    pub fn histograms(&self) -> Result<&[Histogram]> {
        self.collector.histograms()
    }
}

impl HistogramRule for HistObserver {
    fn collector(&self) -> &Collector {
        &self.collector
    }

    fn collector_mut(&mut self) -> &mut Collector {
        &mut self.collector
    }

    fn params(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>> {
        let c = &self.collector;
        params_from_ranges(config, &c.variable, "hist", c.ranges()?)
    }
}
