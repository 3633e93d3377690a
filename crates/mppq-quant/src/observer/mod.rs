//! Calibration observers: they watch the values a tensor takes on calibration data and turn
//! what they saw into the scale(s) and offset(s) of its [`TensorQuantConfig`].
//!
//! The caller downloads each tensor as `&[f32]` plus its shape and hands it to
//! [`Observer::observe`], so observers do not depend on the executor. Observers keep only
//! statistics (ranges, fixed-size histograms, counters): their memory is bounded by the number
//! of channels times the histogram size, never by the amount of calibration data
//! ([`Observer::statistics_len`] reports it).
//!
//! Histogram observers need two passes over the calibration data: pass 0 collects each
//! channel's min/max, pass 1 fills a histogram with that fixed range. The caller runs
//! `for pass in 0..obs.passes() { obs.begin_pass(pass)?; for batch in data { obs.observe(..)? } }`
//! and then [`Observer::finalize`].
//!
//! Conventions shared by all linear observers (see [`range::linear_params`]): the range always
//! includes zero; symmetric `scale = absmax / quant_max` (int8: `absmax / 127`, so ±absmax map
//! to ±127 and −128 is only reached by clipping; PPQ divides by 127.5 instead, which clips the
//! maximum by half a step); asymmetric `scale = (max − min) / (quant_max − quant_min)` and
//! `offset = round(quant_min − min / scale)` clamped to the quant range; the power-of-2 policy
//! rounds the scale up to a power of two; scales are floored at [`range::MIN_SCALE`], so a
//! zero-range tensor gets a valid non-zero scale. Per-channel policies get one scale and offset
//! per channel along `channel_axis`, each computed exactly as the per-tensor observer would on
//! that channel's values alone.

mod channels;
mod constant;
mod floating;
mod fp8;
mod hist;
mod histogram;
mod isotone;
mod kl;
mod minmax;
mod mse;
mod percentile;
pub mod range;
mod two_pass;

pub use channels::{ChannelLayout, RangeStat};
pub use constant::ConstantObserver;
pub use floating::FloatingObserver;
pub use fp8::fp8_round;
pub use hist::HistObserver;
pub use histogram::Histogram;
pub use isotone::IsotoneObserver;
pub use kl::KlObserver;
pub use minmax::MinMaxObserver;
pub use mse::MseObserver;
pub use percentile::PercentileObserver;
pub use two_pass::{Collector, HistMode};

use crate::error::{QuantError, Result};
use mppq_ir::quant::{ObserverKind, TensorQuantConfig};

/// A calibration observer for one variable.
pub trait Observer: Send + std::fmt::Debug {
    /// The registry name (`"minmax"`, `"kl"`, …).
    fn name(&self) -> &'static str;
    /// The variable this observer calibrates (named in every error).
    fn variable(&self) -> &str;
    /// How many passes over the calibration data it needs (1 or 2).
    fn passes(&self) -> usize {
        1
    }
    /// Starts pass `pass` (0-based, below [`Observer::passes`]). Observers start in pass 0;
    /// beginning pass 0 again forgets everything observed.
    fn begin_pass(&mut self, pass: usize) -> Result<()>;
    /// Observes one tensor value (row-major `values` of `shape`).
    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()>;
    /// Writes scale(s) and offset(s) into `config` and sets its state to `Activated`.
    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()>;
    /// How many numbers the observer holds (bounded by channels × histogram size).
    fn statistics_len(&self) -> usize;
    /// Its two-pass histogram collection once both passes ran, for
    /// [`crate::calibrate::ObservationCache`] to hand to observers of the same values. `None`
    /// for observers that collect something else.
    fn collected(&self) -> Option<&Collector> {
        None
    }
    /// Takes what `collected` gathered on the same values instead of observing them; `false`
    /// when that is not what this observer needs (another histogram mode, size or channel axis).
    fn adopt(&mut self, _collected: &Collector) -> bool {
        false
    }
}

/// Tuning knobs of the observers; each observer reads the ones it uses.
#[derive(Clone, Debug, PartialEq)]
pub struct ObserverOptions {
    /// Histogram bins: kl 2048–4096, others 16–65536. Default 2048.
    pub bins: usize,
    /// `percentile`: the fraction of values kept below the upper bound (and above the
    /// lower one), in [0.5, 1]. Default 0.99999. ONNX Runtime's `percentile=99.999` is 0.999995
    /// here (it cuts 0.0005 % from each side); `range_search` tries both.
    pub percentile: f64,
    /// `constant`: the fixed (min, max) range.
    pub constant_range: Option<(f32, f32)>,
    /// `isotone`: the class axis whose argmax must be preserved (default: the last axis).
    pub isotone_axis: Option<usize>,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        Self { bins: 2048, percentile: 0.99999, constant_range: None, isotone_axis: None }
    }
}

impl ObserverOptions {
    /// Checks every option whichever observer runs: histograms are also collected for observers
    /// that are not named (range search, the shared observation cache), so a bad `bins` must
    /// not wait for an observer that reads it.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(16..=65536).contains(&self.bins) {
            return Err(format!("bins = {}: use 16–65536 (kl: 2048–4096)", self.bins));
        }
        if !(0.5..=1.0).contains(&self.percentile) {
            return Err(format!("percentile = {}: use a value in [0.5, 1]", self.percentile));
        }
        if let Some((lo, hi)) = self.constant_range
            && !(lo.is_finite() && hi.is_finite() && lo <= hi)
        {
            return Err(format!("constant_range = [{lo}, {hi}]: use finite numbers with min ≤ max"));
        }
        Ok(())
    }
}

/// Creates an observer of `kind` for `variable`, laid out as `config` says (per-tensor or
/// per-channel along `channel_axis`; linear or floating). `passive` configs are derived from
/// others, never observed: asking for one is an error.
pub fn create_observer(
    kind: ObserverKind,
    variable: &str,
    config: &TensorQuantConfig,
    options: &ObserverOptions,
) -> Result<Box<dyn Observer>> {
    Ok(match kind {
        ObserverKind::Minmax => Box::new(MinMaxObserver::new(variable, config)),
        ObserverKind::Percentile => Box::new(PercentileObserver::new(variable, config, options)?),
        ObserverKind::Kl => Box::new(KlObserver::new(variable, config, options)?),
        ObserverKind::Mse => Box::new(MseObserver::new(variable, config, options)?),
        ObserverKind::Isotone => Box::new(IsotoneObserver::new(variable, config, options)?),
        ObserverKind::Constant => Box::new(ConstantObserver::new(variable, config, options)?),
        ObserverKind::Floating => Box::new(FloatingObserver::new(variable, config, options)?),
        ObserverKind::Hist => Box::new(HistObserver::new(variable, config, options)?),
        ObserverKind::Passive => {
            return Err(QuantError::ConfigMismatch {
                variable: variable.into(),
                observer: "passive",
                message: "a passive config is derived from other configs (s_in · s_w), not observed".into(),
            });
        }
        ObserverKind::Hqq => {
            return Err(QuantError::ConfigMismatch {
                variable: variable.into(),
                observer: "hqq",
                message: "HQQ calibrates block-wise weights only (the `weight-only` platform)".into(),
            });
        }
    })
}

/// Whether observers of `kind` collect the signed two-pass histogram of [`ObserverOptions::bins`]
/// (what [`crate::calibrate::ObservationCache::prefetch_histograms`] fills for min/max configs).
pub fn collects_signed_histogram(kind: ObserverKind) -> bool {
    matches!(kind, ObserverKind::Percentile | ObserverKind::Mse | ObserverKind::Hist)
}

/// Checks a histogram size option.
pub(crate) fn check_bins(observer: &str, bins: usize, allowed: std::ops::RangeInclusive<usize>) -> Result<()> {
    if allowed.contains(&bins) {
        Ok(())
    } else {
        Err(QuantError::InvalidOption {
            observer: observer.into(),
            message: format!("{bins} bins: use {}–{}", allowed.start(), allowed.end()),
        })
    }
}

/// The error for a pass index out of range.
pub(crate) fn bad_pass(variable: &str, observer: &'static str, pass: usize, passes: usize) -> QuantError {
    QuantError::PassOrder {
        variable: variable.into(),
        observer,
        message: format!("has {passes} pass(es); pass {pass} does not exist"),
    }
}
