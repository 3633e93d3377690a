//! `minmax`: the range is the observed minimum and maximum (per channel if asked). One pass.

use super::channels::{ChannelLayout, RangeStat, update_ranges};
use super::range::{params_for, write_params};
use super::{Observer, bad_pass};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

#[derive(Clone, Debug)]
pub struct MinMaxObserver {
    variable: String,
    layout: ChannelLayout,
    ranges: Vec<RangeStat>,
}

impl MinMaxObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig) -> Self {
        Self { variable: variable.into(), layout: ChannelLayout::new(config.channel_axis), ranges: Vec::new() }
    }

    /// The observed per-channel ranges.
    pub fn ranges(&self) -> &[RangeStat] {
        &self.ranges
    }
}

/// Parameters for each channel range; a channel that saw no value is an error.
pub(crate) fn params_from_ranges(
    config: &TensorQuantConfig,
    variable: &str,
    observer: &'static str,
    ranges: &[RangeStat],
) -> Result<Vec<(f64, f64)>> {
    if ranges.is_empty() || ranges.iter().any(|r| r.count == 0) {
        return Err(QuantError::NothingObserved { variable: variable.into(), observer, detail: String::new() });
    }
    Ok(ranges.iter().map(|r| params_for(config, f64::from(r.min), f64::from(r.max))).collect())
}

impl Observer for MinMaxObserver {
    fn name(&self) -> &'static str {
        "minmax"
    }

    fn variable(&self) -> &str {
        &self.variable
    }

    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        if pass != 0 {
            return Err(bad_pass(&self.variable, "minmax", pass, 1));
        }
        self.ranges.clear();
        self.layout.channels = None;
        Ok(())
    }

    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        let (channels, inner) = self.layout.check(&self.variable, values, shape)?;
        update_ranges(&mut self.ranges, values, channels, inner);
        Ok(())
    }

    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        let params = params_from_ranges(config, &self.variable, "minmax", &self.ranges)?;
        write_params(config, &self.variable, "minmax", self.layout.axis, &params)
    }

    fn statistics_len(&self) -> usize {
        self.ranges.len() * 3
    }

    /// A histogram collection's pass 0 is exactly this observer's one pass.
    fn adopt(&mut self, collected: &super::Collector) -> bool {
        let ranges = collected.observed_ranges();
        if collected.layout.axis != self.layout.axis || ranges.is_empty() {
            return false;
        }
        self.layout.channels = collected.layout.channels;
        self.ranges = ranges.to_vec();
        true
    }
}
