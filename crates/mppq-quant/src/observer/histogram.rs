//! A fixed-range histogram with `u64` counts; values outside the range land in the edge bins.

/// Counts over `[lo, hi]` split into equal bins.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    lo: f64,
    hi: f64,
    counts: Vec<u64>,
}

impl Histogram {
    /// `bins` must be at least 1. A zero-width range puts every value in bin 0.
    pub fn new(lo: f64, hi: f64, bins: usize) -> Self {
        Self { lo, hi: hi.max(lo), counts: vec![0; bins.max(1)] }
    }

    pub fn lo(&self) -> f64 {
        self.lo
    }

    pub fn hi(&self) -> f64 {
        self.hi
    }

    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    pub fn bins(&self) -> usize {
        self.counts.len()
    }

    pub fn width(&self) -> f64 {
        (self.hi - self.lo) / self.counts.len() as f64
    }

    /// Left edge of bin `i`; `edge(bins())` is exactly `hi`.
    pub fn edge(&self, i: usize) -> f64 {
        if i >= self.counts.len() { self.hi } else { self.lo + self.width() * i as f64 }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The bin `x` falls in (clamped to the edge bins).
    pub fn bin_of(&self, x: f64) -> usize {
        Self::bin_in(x, self.lo, self.width(), self.counts.len())
    }

    /// `floor((x − lo) / w)` clamped to `0..bins`: truncation is the floor for the positive
    /// quotients that reach it (a `floor` call per value was a library call on x86-64's baseline).
    #[inline]
    fn bin_in(x: f64, lo: f64, w: f64, bins: usize) -> usize {
        if w <= 0.0 {
            return 0;
        }
        let t = (x - lo) / w;
        if t <= 0.0 { 0 } else { (t as usize).min(bins - 1) }
    }

    pub fn add(&mut self, x: f64) {
        let i = self.bin_of(x);
        self.counts[i] += 1;
    }

    /// Adds every value (or its magnitude, with `abs`).
    pub fn add_all(&mut self, values: &[f32], abs: bool) {
        let (lo, w, bins) = (self.lo, self.width(), self.counts.len());
        for &v in values {
            let x = if abs { f64::from(v).abs() } else { f64::from(v) };
            self.counts[Self::bin_in(x, lo, w, bins)] += 1;
        }
    }
}
