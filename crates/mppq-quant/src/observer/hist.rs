//! `hist`: plain two-pass histogram collection (signed values, per channel) for analysis; its
//! finalize is minmax's, from the pass-0 ranges.

use super::minmax::params_from_ranges;
use super::range::write_params;
use super::two_pass::{Collector, HistMode};
use super::{Histogram, Observer, ObserverOptions, check_bins};
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

impl Observer for HistObserver {
    fn name(&self) -> &'static str {
        "hist"
    }

    fn variable(&self) -> &str {
        &self.collector.variable
    }

    fn passes(&self) -> usize {
        2
    }

    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        self.collector.begin_pass(pass)
    }

    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        self.collector.observe(values, shape)
    }

    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        let c = &self.collector;
        let params = params_from_ranges(config, &c.variable, "hist", c.ranges()?)?;
        write_params(config, &c.variable, "hist", c.layout.axis, &params)
    }

    fn statistics_len(&self) -> usize {
        self.collector.statistics_len()
    }
}
