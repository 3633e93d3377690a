//! `floating`: FP8 (E4M3, E5M2, any `exponent_bits`/`mantissa_bits` with `quant_max` as the
//! largest finite value) scale search minimising the quantization MSE, per tensor or channel.
//!
//! Two passes (signed histogram). Candidate scales start at `s₀ = absmax / quant_max` (no
//! clipping): continuous `s₀·2^(−j/16)`, j = 0..=128 (down to s₀/256), or with the power-of-2
//! policy `2^(⌈log₂ s₀⌉ − j)`, j = 0..=16. The error of a candidate is
//! `Σ count·(x − s·fp8(x/s))²` evaluated at 8 evenly spaced points inside each non-empty bin;
//! the smallest error wins (the largest scale on ties). Offset is 0.

use super::fp8::fp8_round;
use super::histogram::Histogram;
use super::range::finish_scale;
use super::two_pass::{Collector, HistMode, HistogramRule};
use super::{ObserverOptions, check_bins};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

const SUBSAMPLES: usize = 8;

#[derive(Clone, Debug)]
pub struct FloatingObserver {
    collector: Collector,
}

impl FloatingObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        check_bins("floating", options.bins, 16..=65536)?;
        check_floating(config, variable)?;
        Ok(Self {
            collector: Collector::new(variable, "floating", config.channel_axis, HistMode::Signed, options.bins),
        })
    }

    /// The chosen scale of each channel.
    pub fn scales(&self, config: &TensorQuantConfig) -> Result<Vec<f64>> {
        check_floating(config, &self.collector.variable)?;
        Ok(self.collector.histograms()?.iter().map(|h| best_scale(config, h)).collect())
    }
}

fn check_floating(config: &TensorQuantConfig, variable: &str) -> Result<()> {
    if !config.policy.is_floating() || config.exponent_bits == 0 || config.quant_max <= 0 {
        return Err(QuantError::UnsupportedPolicy {
            variable: variable.into(),
            observer: "floating",
            message: "configs that are not floating with exponent bits and a positive quant_max".into(),
        });
    }
    Ok(())
}

/// Mean squared error of the histogram's values quantized to the float format with `scale`.
pub fn floating_mse(config: &TensorQuantConfig, h: &Histogram, scale: f64) -> f64 {
    let fmax = config.quant_max as f64;
    let (e, m) = (config.exponent_bits, config.mantissa_bits);
    let w = h.width();
    let mut sum = 0.0;
    let mut n = 0u64;
    for (i, &c) in h.counts().iter().enumerate() {
        if c == 0 {
            continue;
        }
        let a = h.edge(i);
        let mut bin = 0.0;
        for k in 0..SUBSAMPLES {
            let x = a + w * (k as f64 + 0.5) / SUBSAMPLES as f64;
            let d = x - scale * fp8_round(x / scale, e, m, fmax);
            bin += d * d;
        }
        sum += c as f64 * bin / SUBSAMPLES as f64;
        n += c;
    }
    if n == 0 { 0.0 } else { sum / n as f64 }
}

fn best_scale(config: &TensorQuantConfig, h: &Histogram) -> f64 {
    let pow2 = config.policy.is_power_of_2();
    let absmax = h.lo().abs().max(h.hi().abs());
    let s0 = finish_scale(absmax / config.quant_max as f64, pow2);
    let candidates: Vec<f64> = if pow2 {
        (0..=16).map(|j| finish_scale(s0 / 2f64.powi(j), true)).collect()
    } else {
        (0..=128).map(|j| finish_scale(s0 * 2f64.powf(-f64::from(j) / 16.0), false)).collect()
    };
    let mut best = (f64::INFINITY, s0);
    for s in candidates {
        let e = floating_mse(config, h, s);
        if e < best.0 {
            best = (e, s);
        }
    }
    best.1
}

impl HistogramRule for FloatingObserver {
    fn collector(&self) -> &Collector {
        &self.collector
    }

    fn collector_mut(&mut self) -> &mut Collector {
        &mut self.collector
    }

    fn params(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>> {
        Ok(self.scales(config)?.into_iter().map(|s| (s, 0.0)).collect())
    }
}
