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

    /// Adds every value (or its magnitude, with `abs`): the bins of a block of values are
    /// computed first, in a loop the compiler vectorizes (the f64 division dominated, one value at
    /// a time), with exactly [`Self::bin_of`]'s arithmetic; then counted.
    pub fn add_all(&mut self, values: &[f32], abs: bool) {
        let (lo, w, bins) = (self.lo, self.width(), self.counts.len());
        if w <= 0.0 {
            self.counts[0] += values.len() as u64;
            return;
        }
        let mut index = [0u32; BLOCK];
        for block in values.chunks(BLOCK) {
            let index = &mut index[..block.len()];
            dispatch_bins(block, index, lo, w, (bins - 1) as f64, abs);
            for &i in index.iter() {
                self.counts[i as usize] += 1;
            }
        }
    }
}

/// Values whose bins are computed at once by [`Histogram::add_all`].
const BLOCK: usize = 256;

/// `bin_in` for a block: `t = (x − lo) / w`, 0 for `t ≤ 0`, else `min(t, last)` truncated (the
/// same as truncating then clamping, for the finite values observers see).
#[inline(always)]
fn bins_body(values: &[f32], index: &mut [u32], lo: f64, w: f64, last: f64, abs: bool) {
    for (i, &v) in index.iter_mut().zip(values) {
        let x = if abs { f64::from(v).abs() } else { f64::from(v) };
        let t = (x - lo) / w;
        *i = if t <= 0.0 { 0 } else { t.min(last) as u32 };
    }
}

mppq_exec::simd_dispatch!(
    /// [`bins_body`] compiled for the widest vectors this CPU has.
    fn dispatch_bins(values: &[f32], index: &mut [u32], lo: f64, w: f64, last: f64, abs: bool) => bins_body
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_all_bins_exactly_as_add() {
        let values: Vec<f32> = (0..10_000).map(|i| ((i * 7919 % 10_007) as f32 - 5_003.0) * 1e-3).collect();
        let mut edges: Vec<f32> = (0..=64).map(|i| -2.0 + i as f32 * 0.0625).collect();
        edges.extend([-1e9, 1e9, -0.0, 0.0]);
        for abs in [false, true] {
            for (lo, hi, bins) in [(-2.0, 2.0, 64), (0.0, 5.0, 2048), (-5.1, 3.3, 1000), (1.0, 1.0, 16)] {
                let (mut one, mut all) = (Histogram::new(lo, hi, bins), Histogram::new(lo, hi, bins));
                for v in values.iter().chain(&edges) {
                    one.add(if abs { f64::from(*v).abs() } else { f64::from(*v) });
                }
                all.add_all(&values, abs);
                all.add_all(&edges, abs);
                assert_eq!(one, all, "lo {lo} hi {hi} bins {bins} abs {abs}");
            }
        }
    }
}
