//! Pair limits: keeping 8-bit weights inside what an x86 CPU without VNNI adds exactly.
//!
//! ONNX Runtime's u8×s8 kernels (MLAS) on x86 CPUs with AVX2, or AVX-512 without VNNI, multiply
//! with `vpmaddubsw`: the products of two neighbouring positions of the reduction (K) are added
//! into a *saturating* int16 before anything wider. The activation operand is the raw uint8 code
//! (0–255; its zero point is corrected afterwards), so a pair of weight codes of the same sign
//! whose magnitudes add up to more than 128 can overflow (255 · 129 > 32 767 ≥ 255 · 128), and
//! a pair of opposite signs never can (255 · 127 < 32 767). VNNI (`vpdpbusd`), ARM's dot
//! products and the u8×u8 kernels add in int32 and never saturate.
//!
//! A weight config with a [`PairLimit`] keeps every such pair within the limit: after rounding,
//! a same-sign pair above it gives up the excess (the larger magnitude the larger half), so the
//! integer kernels of every CPU class compute the same sums. The simulation and every exporter
//! apply the same [`PairLimit::apply`] to the rounded codes, so what is simulated is what is
//! written. Which K positions a kernel pairs is the quantizer's knowledge ([`PairOrder`]).

use serde::{Deserialize, Serialize};

/// The largest `|q_i| + |q_j|` of a same-sign pair that `vpmaddubsw` adds exactly whatever the
/// uint8 activation codes are: 255 · 128 = 32 640 ≤ 32 767.
pub const X86_PAIR_LIMIT: i64 = 128;

/// One way a kernel walks the reduction of a weight: its K axes, slowest first, and where pairs
/// start. Pairs are consecutive positions `(2j, 2j + 1)` of that walk, within each position of
/// the other (output) axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PairOrder {
    /// The weight's reduction axes in the kernel's K order, slowest first (a Conv weight
    /// `[OC, IC, KH, KW]` walked as (kh, kw, ic), channels fastest: `[2, 3, 1]`).
    pub axes: Vec<usize>,
    /// Pairs restart at every position of the slower axes (the kernel pads the fastest axis to
    /// an even length per position) instead of running on across them.
    pub restart_per_position: bool,
}

/// Same-sign pairs of weight codes whose magnitudes must not add up to more than `limit`, for
/// each of the kernels' walks in `orders` (all enforced: a target may pick any of them).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PairLimit {
    pub limit: i64,
    pub orders: Vec<PairOrder>,
    /// Where some pair of the rounded codes exceeds the limit (calibration decides), quantize the
    /// weight as uint8 with zero point 128 instead: the same codes unlimited, which ORT's u8×u8
    /// kernels add exactly on every CPU, slower than u8×s8 on VNNI CPUs.
    #[serde(default)]
    pub unsigned_when_over: bool,
}

impl PairLimit {
    /// The x86 limit ([`X86_PAIR_LIMIT`]) for these walks.
    pub fn x86(orders: Vec<PairOrder>) -> Self {
        Self { limit: X86_PAIR_LIMIT, orders, unsigned_when_over: false }
    }

    /// Whether these orders fit a weight of `shape` (axes in range, none repeated).
    pub fn fits(&self, shape: &[usize]) -> bool {
        self.orders.iter().all(|o| {
            let mut seen = vec![false; shape.len()];
            o.axes.iter().all(|&a| a < shape.len() && !std::mem::replace(&mut seen[a], true))
        })
    }

    /// Brings every same-sign pair of `codes` (a row-major weight of `shape`, zero point 0)
    /// within the limit; returns how many codes changed. Pairs of several orders may share a
    /// code, so the walk repeats until nothing changes (magnitudes only fall, so it ends).
    pub fn apply(&self, codes: &mut [i64], shape: &[usize]) -> usize {
        if !self.fits(shape) || codes.len() != shape.iter().product::<usize>() {
            return 0;
        }
        self.apply_walks(&walks(&self.orders, shape), codes)
    }

    fn apply_walks(&self, walks: &[Walk], codes: &mut [i64]) -> usize {
        let mut changed = 0;
        for _ in 0..64 {
            let mut round = 0;
            for w in walks {
                w.each(|i, j| round += settle(codes, i, j, self.limit));
            }
            changed += round;
            // One walk's pairs are disjoint: settled once, they stay settled.
            if round == 0 || walks.len() == 1 {
                break;
            }
        }
        changed
    }

    /// Per channel of a symmetric weight (`values` row-major in `shape`, channels along
    /// `channel_axis`), the scale of least squared weight error once the codes are settled:
    /// `scales` (the observer's, which fit the largest magnitude) are raised by a factor of
    /// `1 + i/16`, i = 0..=16 (at 2, every code fits half the range and no pair exceeds the limit;
    /// the even steps are tried, then the two beside the best). `round` is the config's rounding
    /// of `w / s` (f32, as the simulation divides).
    /// A larger scale rounds every weight more coarsely; a smaller one settles more pairs. A
    /// channel with no pair above the limit keeps its scale. Pairs never span channels (the
    /// channel axis is not a reduction axis), so each channel is fitted on its own. Returns the
    /// weight's squared error without the limit and with it (`None` when the limit does not fit).
    pub fn fit_scales(
        &self,
        values: &[f32],
        shape: &[usize],
        channel_axis: Option<usize>,
        scales: &mut [f32],
        range: (i64, i64),
        round: impl Fn(f32) -> f32,
    ) -> Option<PairFit> {
        let len = shape.iter().product::<usize>();
        if !self.fits(shape) || values.len() != len || scales.is_empty() {
            return None;
        }
        // One channel's weights, gathered in row-major order of the other axes.
        let (sub, sub_shape, channels, inner) = match channel_axis {
            Some(axis) if axis < shape.len() && !self.orders.iter().any(|o| o.axes.contains(&axis)) => {
                let remap = |a: usize| if a > axis { a - 1 } else { a };
                let orders = (self.orders.iter())
                    .map(|o| PairOrder { axes: o.axes.iter().map(|&a| remap(a)).collect(), ..o.clone() })
                    .collect();
                let mut sub_shape = shape.to_vec();
                sub_shape.remove(axis);
                (
                    Self { limit: self.limit, orders, unsigned_when_over: self.unsigned_when_over },
                    sub_shape,
                    shape[axis],
                    shape[axis + 1..].iter().product::<usize>(),
                )
            }
            None => (self.clone(), shape.to_vec(), 1, len),
            _ => return None,
        };
        if scales.len() != channels || channels == 0 || inner == 0 {
            return None;
        }
        let mut fit = PairFit::default();
        let squared_error = |codes: &[i64], w: &[f32], s: f32| -> f64 {
            codes.iter().zip(w).map(|(q, x)| (f64::from(*q as f32 * s) - f64::from(*x)).powi(2)).sum()
        };
        let outer = len / (channels * inner);
        let sub_walks = walks(&sub.orders, &sub_shape);
        let mut w = Vec::with_capacity(len / channels);
        let mut codes = Vec::with_capacity(len / channels);
        for (c, scale) in scales.iter_mut().enumerate() {
            w.clear();
            for o in 0..outer {
                let start = (o * channels + c) * inner;
                w.extend_from_slice(&values[start..start + inner]);
            }
            let quantize = |codes: &mut Vec<i64>, s: f32| {
                codes.clear();
                codes.extend(w.iter().map(|x| (round(x / s) as i64).clamp(range.0, range.1)));
            };
            quantize(&mut codes, *scale);
            let unlimited = squared_error(&codes, &w, *scale);
            fit.unlimited_error += unlimited;
            if sub.violations_in(&sub_walks, &codes) == 0 {
                fit.fitted_error += unlimited;
                continue;
            }
            let base = f64::from(*scale);
            let mut error_at = |step: u32| {
                let s = (base * (1.0 + f64::from(step) / 16.0)) as f32;
                quantize(&mut codes, s);
                sub.apply_walks(&sub_walks, &mut codes);
                (squared_error(&codes, &w, s), s)
            };
            // Every other step, then the two beside the best (11 of the 17 steps).
            let mut best = (0..=16).step_by(2).map(|st| (st, error_at(st))).min_by(|a, b| a.1.0.total_cmp(&b.1.0));
            if let Some((st, _)) = best {
                for near in [st.saturating_sub(1), (st + 1).min(16)] {
                    let e = error_at(near);
                    if best.is_none_or(|b| e.0 < b.1.0) {
                        best = Some((near, e));
                    }
                }
            }
            if let Some((_, (e, s))) = best {
                *scale = s;
                fit.fitted_error += e;
            }
        }
        Some(fit)
    }

    /// How many pairs of `codes` exceed the limit (what would saturate on x86 without VNNI).
    pub fn violations(&self, codes: &[i64], shape: &[usize]) -> usize {
        if !self.fits(shape) || codes.len() != shape.iter().product::<usize>() {
            return 0;
        }
        self.violations_in(&walks(&self.orders, shape), codes)
    }

    fn violations_in(&self, walks: &[Walk], codes: &[i64]) -> usize {
        let mut n = 0;
        for w in walks {
            w.each(|i, j| n += usize::from(exceeds(codes[i], codes[j], self.limit)));
        }
        n
    }
}

/// What [`PairLimit::fit_scales`] found: the weight's squared error at the observer's scales
/// without the limit, and at the fitted scales with it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairFit {
    pub unlimited_error: f64,
    pub fitted_error: f64,
}

impl PairFit {
    /// What the limit costs, in dB of weight noise (0 when nothing was settled).
    pub fn cost_db(&self) -> f64 {
        if self.unlimited_error <= 0.0 || self.fitted_error <= self.unlimited_error {
            0.0
        } else {
            10.0 * (self.fitted_error / self.unlimited_error).log10()
        }
    }
}

/// The codes of a weight (`values` row-major in `shape`, one scale per channel of `channel_axis`):
/// `round(w / s)` in f32, clamped to `range`. `None` when the scales do not fit the shape.
pub fn channel_codes(
    values: &[f32],
    shape: &[usize],
    channel_axis: Option<usize>,
    scales: &[f32],
    range: (i64, i64),
    round: impl Fn(f32) -> f32,
) -> Option<Vec<i64>> {
    let runs = ChannelRuns::new(shape, channel_axis, scales.len()).filter(|r| r.len == values.len())?;
    let mut codes = vec![0i64; values.len()];
    runs.each(|r, c| {
        for (q, w) in codes[r.clone()].iter_mut().zip(&values[r]) {
            *q = (round(w / scales[c]) as i64).clamp(range.0, range.1);
        }
    });
    Some(codes)
}

/// The contiguous runs of a row-major tensor that belong to one channel of `channel_axis`
/// (the whole tensor is channel 0 without one): the walk over channels without a division per
/// element.
#[derive(Clone, Copy, Debug)]
pub struct ChannelRuns {
    len: usize,
    run: usize,
    channels: usize,
}

impl ChannelRuns {
    /// `None` when `scales` (one per channel, or one) does not fit `shape`.
    pub fn new(shape: &[usize], channel_axis: Option<usize>, scales: usize) -> Option<Self> {
        let len = shape.iter().product::<usize>();
        let (channels, run) = match channel_axis {
            Some(axis) => (*shape.get(axis)?, shape[axis + 1..].iter().product::<usize>()),
            None => (1, len),
        };
        (scales == channels && channels > 0 && run > 0).then_some(Self { len, run, channels })
    }

    /// Calls `f(range, channel)` for each run, in order.
    pub fn each(&self, mut f: impl FnMut(std::ops::Range<usize>, usize)) {
        for (r, start) in (0..self.len).step_by(self.run).enumerate() {
            f(start..start + self.run, r % self.channels);
        }
    }
}

#[inline]
fn exceeds(a: i64, b: i64, limit: i64) -> bool {
    a.signum() * b.signum() > 0 && a.abs() + b.abs() > limit
}

/// Lowers the magnitudes of a same-sign pair above `limit` to add up to it, the larger one by
/// the larger half of the excess (both stay of their sign: the smaller magnitude exceeds half of
/// the excess, since neither exceeds the limit alone). Returns the number of codes changed.
#[inline]
fn settle(codes: &mut [i64], i: usize, j: usize, limit: i64) -> usize {
    let (a, b) = (codes[i], codes[j]);
    if !exceeds(a, b, limit) {
        return 0;
    }
    let excess = a.abs() + b.abs() - limit;
    let (big, small) = if a.abs() >= b.abs() { (i, j) } else { (j, i) };
    let (down_big, down_small) = ((excess + 1) / 2, excess / 2);
    codes[big] -= codes[big].signum() * down_big;
    codes[small] -= codes[small].signum() * down_small;
    1 + usize::from(down_small > 0)
}

/// The pairs of one [`PairOrder`] in a row-major shape: the pairs of one K walk (offsets), at
/// every position of the other axes (bases).
struct Walk {
    bases: Vec<usize>,
    pairs: Vec<(usize, usize)>,
}

impl Walk {
    #[inline]
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        for &base in &self.bases {
            for &(i, j) in &self.pairs {
                f(base + i, base + j);
            }
        }
    }
}

fn walks(orders: &[PairOrder], shape: &[usize]) -> Vec<Walk> {
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1];
    }
    (orders.iter())
        .map(|order| {
            let outer: Vec<usize> = (0..rank).filter(|a| !order.axes.contains(a)).collect();
            // The K walk's offsets, in pairs; a run restarting per position drops its odd last one.
            let walk = offsets(&order.axes, shape, &strides);
            let fastest = order.axes.last().map(|&a| shape[a]).unwrap_or(1).max(1);
            let pairs = if order.restart_per_position {
                walk.chunks(fastest).flat_map(|run| run.chunks_exact(2).map(|p| (p[0], p[1]))).collect()
            } else {
                walk.chunks_exact(2).map(|p| (p[0], p[1])).collect()
            };
            Walk { bases: offsets(&outer, shape, &strides), pairs }
        })
        .collect()
}

/// The flat offsets of every position of `axes` (row-major over them, the last fastest).
fn offsets(axes: &[usize], shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let mut out = vec![0usize];
    for &a in axes {
        out = out.iter().flat_map(|o| (0..shape[a]).map(move |i| o + i * strides[a])).collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv_order(restart: bool) -> PairOrder {
        PairOrder { axes: vec![2, 3, 1], restart_per_position: restart }
    }

    #[test]
    fn same_sign_pairs_above_the_limit_give_up_the_excess() {
        // MatMul B [K=4, N=1]: pairs (k0, k1), (k2, k3).
        let limit = PairLimit::x86(vec![PairOrder { axes: vec![0], restart_per_position: false }]);
        let mut codes = vec![127, 127, -127, 100];
        assert_eq!(limit.violations(&codes, &[4, 1]), 1);
        assert_eq!(limit.apply(&mut codes, &[4, 1]), 2);
        assert_eq!(codes, vec![64, 64, -127, 100], "opposite signs never saturate");
        let mut codes = vec![-127, -3];
        limit.apply(&mut codes, &[2, 1]);
        assert_eq!(codes, vec![-126, -2]);
        assert_eq!(limit.violations(&codes, &[2, 1]), 0);
    }

    #[test]
    fn conv_pairs_follow_the_channel_walk() {
        // [OC=1, IC=3, KH=1, KW=2]: walked (kw, ic): k = kw·3 + ic. Flattened pairs:
        // (kw0 ic0, kw0 ic1), (kw0 ic2, kw1 ic0), (kw1 ic1, kw1 ic2); per position: the first
        // and the third only. Layout index of (ic, kw) = ic·2 + kw.
        let shape = [1, 3, 1, 2];
        let mut codes = vec![0i64; 6];
        codes[2 * 2] = 100; // ic2 kw0
        codes[1] = 100; // ic0 kw1
        assert_eq!(PairLimit::x86(vec![conv_order(false)]).violations(&codes, &shape), 1);
        assert_eq!(PairLimit::x86(vec![conv_order(true)]).violations(&codes, &shape), 0);
        let both = PairLimit::x86(vec![conv_order(false), conv_order(true)]);
        both.apply(&mut codes, &shape);
        assert_eq!((codes[4], codes[1]), (64, 64));
    }

    #[test]
    fn fitted_scales_lose_less_than_halving_the_range() {
        // Two output channels of 64 weights along K, heavy-tailed (a few pairs near the top).
        let shape = [2, 64];
        let values: Vec<f32> = (0..128).map(|i| ((i * 37 % 101) as f32 / 50.0 - 1.0).powi(3)).collect();
        let limit = PairLimit::x86(vec![PairOrder { axes: vec![1], restart_per_position: false }]);
        let absmax = |c: usize| values[c * 64..(c + 1) * 64].iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut scales = vec![absmax(0) / 127.0, absmax(1) / 127.0];
        let observer = scales.clone();
        let fit = limit.fit_scales(&values, &shape, Some(0), &mut scales, (-128, 127), f32::round_ties_even).unwrap();
        assert!(fit.fitted_error >= fit.unlimited_error && fit.cost_db() > 0.0, "{fit:?}");
        // 7-bit weights (twice the scale) cost 6 dB; the fit at most that.
        assert!(fit.cost_db() <= 10.0 * 4f64.log10() + 1e-9, "{fit:?}");
        assert!(scales.iter().zip(&observer).all(|(s, o)| s >= o && *s <= 2.0 * o * (1.0 + 1e-6)));
        let mut codes: Vec<i64> =
            values.iter().enumerate().map(|(i, w)| (w / scales[i / 64]).round_ties_even() as i64).collect();
        limit.apply(&mut codes, &shape);
        assert_eq!(limit.violations(&codes, &shape), 0);
    }

    #[test]
    fn orders_that_do_not_fit_change_nothing() {
        let limit = PairLimit::x86(vec![PairOrder { axes: vec![3], restart_per_position: false }]);
        let mut codes = vec![127, 127];
        assert_eq!(limit.apply(&mut codes, &[2, 1]), 0);
        assert_eq!(codes, vec![127, 127]);
    }
}
