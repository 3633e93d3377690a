//! `constant`: a fixed range given by the user (`ObserverOptions::constant_range`); the data is
//! not looked at, only the shape (to know the channel count of per-channel configs).

use super::channels::ChannelLayout;
use super::range::{params_for, write_params};
use super::{Observer, ObserverOptions, bad_pass};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

#[derive(Clone, Debug)]
pub struct ConstantObserver {
    variable: String,
    layout: ChannelLayout,
    range: (f32, f32),
}

impl ConstantObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        let invalid = |message: String| QuantError::InvalidOption { observer: "constant".into(), message };
        let Some((lo, hi)) = options.constant_range else {
            return Err(invalid(format!("variable `{variable}`: constant_range is not set")));
        };
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(invalid(format!("variable `{variable}`: range [{lo}, {hi}] must be finite with min <= max")));
        }
        Ok(Self { variable: variable.into(), layout: ChannelLayout::new(config.channel_axis), range: (lo, hi) })
    }
}

impl Observer for ConstantObserver {
    fn name(&self) -> &'static str {
        "constant"
    }

    fn variable(&self) -> &str {
        &self.variable
    }

    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        if pass != 0 {
            return Err(bad_pass(&self.variable, "constant", pass, 1));
        }
        Ok(())
    }

    /// Only checks the shape (and finiteness) and records the channel count.
    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        self.layout.check(&self.variable, values, shape).map(|_| ())
    }

    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        let channels = match self.layout.axis {
            None => 1,
            Some(_) => self.layout.channels.ok_or_else(|| QuantError::NothingObserved {
                variable: self.variable.clone(),
                observer: "constant",
                detail: ": a per-channel config needs one observation to know the channel count".into(),
            })?,
        };
        let p = params_for(config, f64::from(self.range.0), f64::from(self.range.1));
        write_params(config, &self.variable, "constant", self.layout.axis, &vec![p; channels])
    }

    fn statistics_len(&self) -> usize {
        2
    }
}
