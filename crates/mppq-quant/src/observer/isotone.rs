//! `isotone`: for softmax/sigmoid outputs, where what matters is that the argmax survives
//! quantization (PPQ's isotone observer idea: keep `argmax(x) == argmax(quant(x))`).
//!
//! What is implemented: per tensor only, two passes. Pass 0 records min/max. Pass 1 takes every
//! sample (all positions except the class axis, default the last axis), finds its largest and
//! second largest values L1 ≥ L2, and for each of 256 candidate ranges `[lo, hi·k/256]`
//! (lo = min(min, 0) fixed, k = 1..256, parameters from the shared `params_for`, power-of-2
//! included) counts whether `q(L1) > q(L2)` with `q(x) = clamp(round(x/scale) + offset)`:
//! the argmax is then unique and unchanged. Finalize picks the candidate preserving the most
//! samples, the widest one on ties, so the observer only clips when clipping keeps more argmaxes
//! (a finer step separates close top-2 pairs) than it loses (both clipped to `quant_max`).
//! Memory: 256 counters. A class axis of size 1 preserves trivially.
//!
//! Differences from PPQ/mPPQ's `TorchIsotoneObserver`: PPQ caches every sample's (L1, L2)
//! (memory grows with the data), gives each sample the *sufficient* scale interval
//! `[L2 / (quant_max − 0.51), 2·(L1 − L2)]`, sweeps for the scale inside the most intervals and
//! takes its smallest end, and writes offset 0 even for asymmetric configs. Here the exact
//! condition is counted for the parameters actually written (asymmetric offsets included), on a
//! fixed grid of 256 ranges (so the scale resolution is `hi/256`), with bounded memory.

use super::channels::{ChannelLayout, RangeStat, update_ranges};
use super::range::{params_for, write_params};
use super::{Observer, ObserverOptions, bad_pass};
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

/// Candidate ranges.
pub const ISOTONE_CANDIDATES: usize = 256;

#[derive(Clone, Debug)]
pub struct IsotoneObserver {
    variable: String,
    config: TensorQuantConfig,
    axis: Option<usize>,
    layout: ChannelLayout,
    pass: usize,
    range: Vec<RangeStat>,
    /// `(scale, offset)` of each candidate, set when pass 1 begins.
    candidates: Vec<(f64, f64)>,
    preserved: Vec<u64>,
    samples: u64,
}

impl IsotoneObserver {
    pub fn new(variable: &str, config: &TensorQuantConfig, options: &ObserverOptions) -> Result<Self> {
        if config.policy.is_per_channel() || config.policy.is_floating() {
            return Err(QuantError::UnsupportedPolicy {
                variable: variable.into(),
                observer: "isotone",
                message: "per-channel or floating policies (it is per-tensor, linear)".into(),
            });
        }
        Ok(Self {
            variable: variable.into(),
            config: config.clone(),
            axis: options.isotone_axis,
            layout: ChannelLayout::new(None),
            pass: 0,
            range: Vec::new(),
            candidates: Vec::new(),
            preserved: Vec::new(),
            samples: 0,
        })
    }

    /// How many samples each candidate range keeps the argmax of, and how many samples there were.
    pub fn preserved_counts(&self) -> (&[u64], u64) {
        (&self.preserved, self.samples)
    }

    fn quant(&self, (s, o): (f64, f64), x: f64) -> f64 {
        (self.config.rounding.round(x / s) + o).clamp(self.config.quant_min as f64, self.config.quant_max as f64)
    }
}

impl Observer for IsotoneObserver {
    fn name(&self) -> &'static str {
        "isotone"
    }

    fn variable(&self) -> &str {
        &self.variable
    }

    fn passes(&self) -> usize {
        2
    }

    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        match pass {
            0 => {
                self.range.clear();
                self.candidates.clear();
                self.preserved.clear();
                self.samples = 0;
            }
            1 => {
                let Some(r) = self.range.first().filter(|r| r.count > 0) else {
                    return Err(QuantError::NothingObserved {
                        variable: self.variable.clone(),
                        observer: "isotone",
                        detail: " in pass 0 (min/max)".into(),
                    });
                };
                let (lo, hi) = (f64::from(r.min).min(0.0), f64::from(r.max).max(0.0));
                self.candidates = (1..=ISOTONE_CANDIDATES)
                    .map(|k| params_for(&self.config, lo, hi * k as f64 / ISOTONE_CANDIDATES as f64))
                    .collect();
                self.preserved = vec![0; ISOTONE_CANDIDATES];
                self.samples = 0;
            }
            _ => return Err(bad_pass(&self.variable, "isotone", pass, 2)),
        }
        self.pass = pass;
        Ok(())
    }

    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        let (channels, inner) = self.layout.check(&self.variable, values, shape)?;
        if self.pass == 0 {
            update_ranges(&mut self.range, values, channels, inner);
            return Ok(());
        }
        if values.is_empty() {
            return Ok(());
        }
        let axis = self.axis.unwrap_or(shape.len().saturating_sub(1));
        let Some(&classes) = shape.get(axis) else {
            return Err(QuantError::Shape {
                variable: self.variable.clone(),
                message: format!("class axis {axis} out of range for shape {shape:?}"),
            });
        };
        let inner: usize = shape[axis + 1..].iter().product();
        let outer = values.len() / (classes * inner).max(1);
        for o in 0..outer {
            for i in 0..inner {
                let base = o * classes * inner + i;
                let (mut l1, mut l2) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
                for c in 0..classes {
                    let v = f64::from(values[base + c * inner]);
                    if v > l1 {
                        l2 = l1;
                        l1 = v;
                    } else if v > l2 {
                        l2 = v;
                    }
                }
                self.samples += 1;
                for (k, &p) in self.candidates.iter().enumerate() {
                    if classes < 2 || self.quant(p, l1) > self.quant(p, l2) {
                        self.preserved[k] += 1;
                    }
                }
            }
        }
        Ok(())
    }

    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        if self.pass != 1 {
            return Err(QuantError::PassOrder {
                variable: self.variable.clone(),
                observer: "isotone",
                message: "needs 2 passes: finalize was called before pass 1 ran".into(),
            });
        }
        if self.samples == 0 {
            return Err(QuantError::NothingObserved {
                variable: self.variable.clone(),
                observer: "isotone",
                detail: " in pass 1".into(),
            });
        }
        let same = config.policy == self.config.policy
            && config.quant_min == self.config.quant_min
            && config.quant_max == self.config.quant_max
            && config.rounding == self.config.rounding;
        if !same {
            return Err(QuantError::ConfigMismatch {
                variable: self.variable.clone(),
                observer: "isotone",
                message: "policy, quant range or rounding differs from construction".into(),
            });
        }
        // Most preserved; the widest (last) candidate on ties.
        let mut best = 0;
        for (k, &n) in self.preserved.iter().enumerate() {
            if n >= self.preserved[best] {
                best = k;
            }
        }
        let params = self.candidates.get(best).copied().into_iter().collect::<Vec<_>>();
        write_params(config, &self.variable, "isotone", None, &params)
    }

    fn statistics_len(&self) -> usize {
        self.range.len() * 3 + self.candidates.len() * 2 + self.preserved.len() + 1
    }
}
