//! `mse`: picks the range minimising the expected quantization MSE, estimated from a two-pass
//! signed histogram (per tensor or per channel).
//!
//! The error of a candidate `(scale, offset)` is computed exactly for values spread uniformly
//! inside each histogram bin: quantize-dequantize maps `x` to the nearest multiple of `scale`
//! clamped to `[scale·(quant_min − offset), scale·(quant_max − offset)]`, so each bin's mean
//! squared error has a closed form (sawtooth inside the grid, quadratic beyond the clamp).
//! Candidates: symmetric `t = absmax·k/512` for k = 1..512 (range `[−t, t]`); asymmetric
//! `[lo·i/512, hi·j/512]` searched by coordinate descent (best `j` for fixed `i`, then best `i`,
//! from the full range, 3 rounds). Parameters come from the same `params_for` as every
//! observer (power-of-2 included), so the error is that of the parameters actually written.

use super::histogram::Histogram;
use super::range::params_for;
use super::two_pass::{Collector, HistMode, HistogramRule};
use super::{ObserverOptions, check_bins};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

/// Candidate steps per range end.
pub const MSE_CANDIDATES: usize = 512;

#[derive(Clone, Debug)]
pub struct MseObserver {
    collector: Collector,
}

impl MseObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        check_bins("mse", options.bins, 16..=65536)?;
        if config.policy.is_floating() {
            return Err(QuantError::UnsupportedPolicy {
                variable: variable.into(),
                observer: "mse",
                message: "floating formats (use `floating`)".into(),
            });
        }
        Ok(Self { collector: Collector::new(variable, "mse", config.channel_axis, HistMode::Signed, options.bins) })
    }

    /// The chosen `(lo, hi)` range of each channel for `config`.
    pub fn ranges(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>> {
        Ok(self.collector.histograms()?.iter().map(|h| best_range(config, h)).collect())
    }
}

/// Mean of `(x − Q(x))²` for `x` uniform on `[a, b]`, `Q` = nearest multiple of `s` clamped to
/// `[qlo, qhi]` (both multiples of `s`).
pub fn interval_mse(a: f64, b: f64, s: f64, qlo: f64, qhi: f64) -> f64 {
    if b - a <= 0.0 {
        let q = (a / s).round_ties_even() * s;
        let e = a - q.clamp(qlo, qhi);
        return e * e;
    }
    // ∫₀ˣ (t − s·round(t/s))² dt with x = s(k + u), k = round(x/s).
    let saw = |x: f64| {
        let k = (x / s).round();
        let u = x / s - k;
        s * s * s * (k / 12.0 + u * u * u / 3.0)
    };
    let mut total = 0.0;
    if a < qlo {
        let m = b.min(qlo);
        total += ((m - qlo).powi(3) - (a - qlo).powi(3)) / 3.0;
    }
    let (ma, mb) = (a.max(qlo), b.min(qhi));
    if mb > ma {
        total += saw(mb) - saw(ma);
    }
    if b > qhi {
        let m = a.max(qhi);
        total += ((b - qhi).powi(3) - (m - qhi).powi(3)) / 3.0;
    }
    (total / (b - a)).max(0.0)
}

/// Expected squared error of the histogram's values under `(scale, offset)`, per value.
pub fn histogram_mse(config: &TensorQuantConfig, h: &Histogram, scale: f64, offset: f64) -> f64 {
    let qlo = scale * (config.quant_min as f64 - offset);
    let qhi = scale * (config.quant_max as f64 - offset);
    let mut sum = 0.0;
    let mut n = 0u64;
    for (i, &c) in h.counts().iter().enumerate() {
        if c != 0 {
            sum += c as f64 * interval_mse(h.edge(i), h.edge(i + 1), scale, qlo, qhi);
            n += c;
        }
    }
    if n == 0 { 0.0 } else { sum / n as f64 }
}

fn best_range(config: &TensorQuantConfig, h: &Histogram) -> (f64, f64) {
    let k = MSE_CANDIDATES as f64;
    let cost = |lo: f64, hi: f64| {
        let (s, o) = params_for(config, lo, hi);
        histogram_mse(config, h, s, o)
    };
    let (lo, hi) = (h.lo(), h.hi());
    if config.policy.is_symmetric() {
        let absmax = lo.abs().max(hi);
        let mut best = (f64::INFINITY, absmax);
        for i in (1..=MSE_CANDIDATES).rev() {
            let t = absmax * i as f64 / k;
            let e = cost(-t, t);
            if e < best.0 {
                best = (e, t);
            }
        }
        return (-best.1, best.1);
    }
    let (mut i, mut j) = (MSE_CANDIDATES, MSE_CANDIDATES);
    for _ in 0..3 {
        let at = |i: usize, j: usize| cost(lo * i as f64 / k, hi * j as f64 / k);
        let mut best = (f64::INFINITY, j);
        for nj in (1..=MSE_CANDIDATES).rev() {
            let e = at(i, nj);
            if e < best.0 {
                best = (e, nj);
            }
        }
        j = best.1;
        let mut best = (f64::INFINITY, i);
        for ni in (1..=MSE_CANDIDATES).rev() {
            let e = at(ni, j);
            if e < best.0 {
                best = (e, ni);
            }
        }
        i = best.1;
    }
    (lo * i as f64 / k, hi * j as f64 / k)
}

impl HistogramRule for MseObserver {
    fn collector(&self) -> &Collector {
        &self.collector
    }

    fn collector_mut(&mut self) -> &mut Collector {
        &mut self.collector
    }

    fn params(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>> {
        Ok(self.ranges(config)?.into_iter().map(|(lo, hi)| params_for(config, lo, hi)).collect())
    }
}
