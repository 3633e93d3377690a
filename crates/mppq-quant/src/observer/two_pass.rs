//! The two-pass histogram collector shared by the histogram observers: pass 0 records each
//! channel's min/max, pass 1 fills one fixed-range histogram per channel. Memory: channels ×
//! (bins + a few numbers), whatever the amount of data.

use super::Observer;
use super::channels::{ChannelLayout, RangeStat, for_each_chunk, update_ranges};
use super::histogram::Histogram;
use super::range::write_params;
use crate::error::{QuantError, Result};
use mppq_ir::quant::TensorQuantConfig;

/// A two-pass histogram observer: collection is the shared [`Collector`]'s; only the rule that
/// turns its statistics into parameters differs. Implementing this gives the [`Observer`].
pub trait HistogramRule: Send + std::fmt::Debug {
    fn collector(&self) -> &Collector;
    fn collector_mut(&mut self) -> &mut Collector;
    /// One `(scale, offset)` per channel for `config`, from the collected statistics.
    fn params(&self, config: &TensorQuantConfig) -> Result<Vec<(f64, f64)>>;
}

impl<T: HistogramRule> Observer for T {
    fn name(&self) -> &'static str {
        self.collector().observer
    }

    fn variable(&self) -> &str {
        &self.collector().variable
    }

    fn passes(&self) -> usize {
        2
    }

    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        self.collector_mut().begin_pass(pass)
    }

    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        self.collector_mut().observe(values, shape)
    }

    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        let params = self.params(config)?;
        let c = self.collector();
        write_params(config, &c.variable, c.observer, c.layout.axis, &params)
    }

    fn statistics_len(&self) -> usize {
        self.collector().statistics_len()
    }

    fn collected(&self) -> Option<&Collector> {
        Some(self.collector()).filter(|c| c.is_complete())
    }

    fn adopt(&mut self, collected: &Collector) -> bool {
        self.collector_mut().adopt(collected)
    }
}

/// What the histograms count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistMode {
    /// Values over `[min(min, 0), max(max, 0)]`.
    Signed,
    /// Magnitudes `|x|` over `[0, absmax]` (TensorRT-style symmetric calibration).
    Abs,
}

#[derive(Clone, Debug)]
pub struct Collector {
    pub variable: String,
    pub observer: &'static str,
    pub layout: ChannelLayout,
    pub mode: HistMode,
    pub bins: usize,
    pass: usize,
    ranges: Vec<RangeStat>,
    hists: Vec<Histogram>,
}

impl Collector {
    pub fn new(variable: &str, observer: &'static str, axis: Option<usize>, mode: HistMode, bins: usize) -> Self {
        Self {
            variable: variable.into(),
            observer,
            layout: ChannelLayout::new(axis),
            mode,
            bins,
            pass: 0,
            ranges: Vec::new(),
            hists: Vec::new(),
        }
    }

    pub fn begin_pass(&mut self, pass: usize) -> Result<()> {
        match pass {
            0 => {
                self.ranges.clear();
                self.hists.clear();
                self.layout.channels = None;
            }
            1 => {
                if self.ranges.iter().all(|r| r.count == 0) {
                    return Err(self.nothing(" in pass 0 (min/max)"));
                }
                self.hists = self
                    .ranges
                    .iter()
                    .map(|r| {
                        let (lo, hi) = (f64::from(r.min), f64::from(r.max));
                        match self.mode {
                            HistMode::Signed => Histogram::new(lo.min(0.0), hi.max(0.0), self.bins),
                            HistMode::Abs => Histogram::new(0.0, lo.abs().max(hi.abs()), self.bins),
                        }
                    })
                    .collect();
            }
            _ => return Err(super::bad_pass(&self.variable, self.observer, pass, 2)),
        }
        self.pass = pass;
        Ok(())
    }

    pub fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        let (channels, inner) = self.layout.check(&self.variable, values, shape)?;
        if self.pass == 0 {
            update_ranges(&mut self.ranges, values, channels, inner);
            return Ok(());
        }
        let (hists, mode) = (&mut self.hists, self.mode);
        if hists.len() != channels {
            return Err(QuantError::Shape {
                variable: self.variable.clone(),
                message: format!("{channels} channels in pass 1, {} in pass 0", hists.len()),
            });
        }
        for_each_chunk(values, channels, inner, |c, chunk| hists[c].add_all(chunk, mode == HistMode::Abs));
        Ok(())
    }

    fn nothing(&self, detail: &str) -> QuantError {
        QuantError::NothingObserved { variable: self.variable.clone(), observer: self.observer, detail: detail.into() }
    }

    /// Pass-0 ranges (errors if nothing was observed).
    pub fn ranges(&self) -> Result<&[RangeStat]> {
        if self.ranges.iter().all(|r| r.count == 0) {
            return Err(self.nothing(""));
        }
        Ok(&self.ranges)
    }

    /// Pass-1 histograms (errors if pass 1 did not run or saw nothing).
    pub fn histograms(&self) -> Result<&[Histogram]> {
        self.ranges()?;
        if self.pass != 1 {
            return Err(QuantError::PassOrder {
                variable: self.variable.clone(),
                observer: self.observer,
                message: "needs 2 passes: finalize was called before pass 1 ran".into(),
            });
        }
        if self.hists.iter().all(|h| h.total() == 0) {
            return Err(self.nothing(" in pass 1 (histogram)"));
        }
        Ok(&self.hists)
    }

    /// Whether both passes ran.
    pub fn is_complete(&self) -> bool {
        self.pass == 1 && !self.hists.is_empty()
    }

    /// Whether `other` collects the same statistics (histogram mode, size and channel axis).
    pub fn collects_like(&self, other: &Collector) -> bool {
        other.mode == self.mode && other.bins == self.bins && other.layout.axis == self.layout.axis
    }

    /// Takes `other`'s statistics when it collected them the same way ([`Self::collects_like`])
    /// and both of its passes ran; returns whether it did.
    pub fn adopt(&mut self, other: &Collector) -> bool {
        if !self.collects_like(other) || !other.is_complete() {
            return false;
        }
        self.layout.channels = other.layout.channels;
        self.pass = other.pass;
        self.ranges.clone_from(&other.ranges);
        self.hists.clone_from(&other.hists);
        true
    }

    /// The pass-0 ranges, possibly empty (see [`Self::ranges`] for the checked ones).
    pub fn observed_ranges(&self) -> &[RangeStat] {
        &self.ranges
    }

    pub fn statistics_len(&self) -> usize {
        self.ranges.len() * 3 + self.hists.iter().map(|h| h.bins() + 2).sum::<usize>()
    }
}
