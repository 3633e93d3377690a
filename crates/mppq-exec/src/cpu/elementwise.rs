//! Elementwise maps over float32 buffers, compiled once per instruction set and chosen at run
//! time: the simulation's integer arithmetic uses `f32::mul_add` and `round_ties_even`, which
//! the x86-64 baseline build turns into library calls (software FMA, ~20× slower) unless the
//! loop is compiled with FMA and SSE4.1 enabled. Large buffers are split across threads.

use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Below this many values a map runs on the calling thread.
const THREADED_LEN: usize = 1 << 16;

/// `f(src[i], i / run)` for every `i`: `run` consecutive values share a parameter index (a
/// channel's run of `inner` values, or the whole buffer with `run = usize::MAX`).
pub fn map_runs(src: &[f32], run: usize, f: impl Fn(f32, usize) -> f32 + Sync) -> Vec<f32> {
    written(src.len(), |dst| {
        let run = run.max(1);
        if src.len() < THREADED_LEN {
            return dispatch_unary(src, dst, 0, run, &f);
        }
        // Chunks start on run boundaries when runs are shorter than a chunk, so each chunk knows
        // its first run index.
        let chunk = if run < THREADED_LEN { THREADED_LEN.div_ceil(run) * run } else { THREADED_LEN };
        dst.par_chunks_mut(chunk).zip(src.par_chunks(chunk)).enumerate().for_each(|(c, (d, s))| {
            dispatch_unary(s, d, c * chunk, run, &f);
        });
    })
}

/// `f(a[i], b[i])` for every `i` (`a` and `b` of one length).
pub fn map2(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Vec<f32> {
    assert_eq!(a.len(), b.len());
    written(a.len(), |dst| {
        if dst.len() < THREADED_LEN {
            return dispatch_binary(a, b, dst, &f);
        }
        dst.par_chunks_mut(THREADED_LEN)
            .zip(a.par_chunks(THREADED_LEN).zip(b.par_chunks(THREADED_LEN)))
            .for_each(|(d, (x, y))| dispatch_binary(x, y, d, &f));
    })
}

/// A vector of `len` values that `fill` writes, every one of them, into its uninitialised
/// buffer: the maps' outputs are not zeroed first (that `memset` was 6 % of a PP-OCR detector's
/// quantize time, a second pass over memory the map overwrites).
fn written(len: usize, fill: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut values = Vec::with_capacity(len);
    fill(&mut values.spare_capacity_mut()[..len]);
    // SAFETY: every caller's `fill` writes each of the `len` values (the bodies below visit every
    // index of `dst`), and the capacity is at least `len`.
    unsafe { values.set_len(len) };
    values
}

#[inline(always)]
fn unary_body<F: Fn(f32, usize) -> f32>(src: &[f32], dst: &mut [MaybeUninit<f32>], first: usize, run: usize, f: &F) {
    assert_eq!(src.len(), dst.len());
    // Walk whole runs so the parameter index is computed once per run.
    let mut i = 0;
    while i < src.len() {
        let index = (first + i) / run;
        let end = src.len().min((index + 1) * run - first);
        for (d, s) in dst[i..end].iter_mut().zip(&src[i..end]) {
            d.write(f(*s, index));
        }
        i = end;
    }
}

#[inline(always)]
fn binary_body<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [MaybeUninit<f32>], f: &F) {
    assert!(a.len() == dst.len() && b.len() == dst.len());
    for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
        d.write(f(*x, *y));
    }
}

/// `f(x)` over a contiguous CPU float32 tensor; `None` for any other tensor.
pub fn try_unary(x: &crate::tensor::Tensor, f: impl Fn(f32) -> f32 + Sync) -> Option<crate::tensor::Tensor> {
    let values = super::f32_values(x)?;
    Some(x.like_f32(&x.shape(), map_runs(values, usize::MAX, |v, _| f(v))))
}

/// `f(a, b)` over two contiguous CPU float32 tensors of one shape, or where one of them
/// broadcasts into the other as a contiguous block of its dimensions (a scalar, a per-channel
/// `[1, C, 1, 1]`, a row `[W]`: every value of it then serves a run of the other's consecutive
/// values); `None` otherwise (the caller broadcasts with Burn). Same arithmetic as Burn's.
pub fn try_binary(
    a: &crate::tensor::Tensor,
    b: &crate::tensor::Tensor,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Option<crate::tensor::Tensor> {
    let (av, bv) = (super::f32_values(a)?, super::f32_values(b)?);
    let (sa, sb) = (a.shape(), b.shape());
    if sa == sb {
        return Some(a.like_f32(&sa, map2(av, bv, f)));
    }
    if let Some((run, period)) = broadcast_runs(&sa, &sb) {
        return Some(a.like_f32(&sa, map_runs(av, run, |v, i| f(v, bv[i % period]))));
    }
    if let Some((run, period)) = broadcast_runs(&sb, &sa) {
        return Some(b.like_f32(&sb, map_runs(bv, run, |v, i| f(av[i % period], v))));
    }
    None
}

/// How `small` broadcasts into `big` (the result has `big`'s shape) when its values form one
/// contiguous block of `big`'s dimensions: each of its `period` values serves a run of `run`
/// consecutive values of `big`, cycling. `None` for any other broadcast.
fn broadcast_runs(big: &[usize], small: &[usize]) -> Option<(usize, usize)> {
    if small.len() > big.len() {
        return None;
    }
    let padded: Vec<usize> = std::iter::repeat_n(1, big.len() - small.len()).chain(small.iter().copied()).collect();
    let Some(first) = padded.iter().position(|&d| d != 1) else {
        return Some((usize::MAX, 1));
    };
    let last = padded.iter().rposition(|&d| d != 1).unwrap_or(first);
    (padded[first..=last] == big[first..=last]).then(|| {
        let run = big[last + 1..].iter().product::<usize>();
        (run, padded[first..=last].iter().product())
    })
}

crate::simd_dispatch!(fn dispatch_unary<F: Fn(f32, usize) -> f32>(src: &[f32], dst: &mut [MaybeUninit<f32>], first: usize, run: usize, f: &F) => unary_body);
crate::simd_dispatch!(fn dispatch_binary<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [MaybeUninit<f32>], f: &F) => binary_body);

/// The logistic function as ONNX Runtime computes it (MLAS's FMA3 kernel on x86-64): Eigen's
/// rational approximation on `x` clamped to ±18, `p(x)/q(x) + 0.5` with every polynomial step one
/// fused multiply-add; NaN stays NaN. It differs from `1/(1 + e^−x)` by a few ulps: enough to move
/// a table entry of ORT's QLinearSigmoid across a rounding boundary, so float Sigmoid and the
/// integer simulation both use it. Only multiply-adds: [`map_runs`] vectorizes it.
#[allow(clippy::excessive_precision)] // MLAS's float literals, as written there
#[inline(always)]
pub fn logistic(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    const ALPHA: [f32; 5] =
        [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03, 2.48287947061529e-01];
    const BETA: [f32; 6] = [
        6.10247389755681e-13,
        5.76102136993427e-09,
        6.29106785017040e-06,
        1.70198817374094e-03,
        1.16817656904453e-01,
        9.93151921023180e-01,
    ];
    let x = x.clamp(-18.0, 18.0);
    let x2 = x * x;
    let p = ALPHA[1..].iter().fold(ALPHA[0], |p, a| x2.mul_add(p, *a));
    let q = BETA[1..].iter().fold(BETA[0], |q, b| x2.mul_add(q, *b));
    ((x * p) / q + 0.5).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_get_their_index_on_every_path() {
        for (len, run) in [(10, 3), (200_000, 7), (200_000, 100_000), (5, usize::MAX), (70_000, 1)] {
            let src: Vec<f32> = (0..len).map(|i| i as f32).collect();
            let dst = map_runs(&src, run, |v, c| v.mul_add(2.0, c as f32).round_ties_even());
            for (i, d) in dst.iter().enumerate() {
                assert_eq!(
                    *d,
                    (i as f32).mul_add(2.0, (i / run) as f32).round_ties_even(),
                    "len {len} run {run} at {i}"
                );
            }
        }
    }

    #[test]
    fn logistic_is_mlas_rational_approximation() {
        // Symmetric around 0.5, saturating at ±18, within a few ulps of the exact function.
        assert_eq!(logistic(0.0), 0.5);
        assert_eq!(logistic(40.0), logistic(18.0));
        let mut worst = 0f64;
        for i in -40_000..=40_000 {
            let x = i as f32 * 5e-4;
            let exact = 1.0 / (1.0 + (-f64::from(x)).exp());
            worst = worst.max((f64::from(logistic(x)) - exact).abs());
        }
        assert!(worst < 3e-7, "max |error| {worst:e}");
        assert!(logistic(f32::NAN).is_nan());
        assert!(logistic(f32::INFINITY) > 0.999_999 && logistic(f32::NEG_INFINITY) < 1e-6);
    }

    #[test]
    fn binary_maps_pair_values() {
        let a: Vec<f32> = (0..100_000).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..100_000).map(|i| 1.0 - i as f32).collect();
        let d = map2(&a, &b, |x, y| x.mul_add(3.0, y));
        assert!(d.iter().enumerate().all(|(i, v)| *v == a[i].mul_add(3.0, b[i])));
    }

    /// Contiguous-block broadcasts run on the fast path and give Burn's values, either operand
    /// broadcast; other broadcasts are left to Burn.
    #[test]
    fn block_broadcasts_match_burn() {
        use crate::device::Device;
        use crate::tensor::Tensor;
        use burn::backend::Dispatch;
        use burn::backend::ops::FloatTensorOps;
        assert_eq!(broadcast_runs(&[2, 3, 4, 5], &[1, 3, 1, 1]), Some((20, 3)));
        assert_eq!(broadcast_runs(&[2, 3, 4, 5], &[4, 5]), Some((1, 20)));
        assert_eq!(broadcast_runs(&[2, 3, 4, 5], &[]), Some((usize::MAX, 1)));
        assert_eq!(broadcast_runs(&[2, 3, 4, 5], &[3, 1, 5]), None);
        let device = Device::cpu();
        let cases: [(&[usize], &[usize]); 5] = [
            (&[2, 3, 4, 5], &[1, 3, 1, 1]),
            (&[2, 3, 4, 5], &[3, 1, 1]),
            (&[2, 3, 4, 5], &[5]),
            (&[3, 1, 1], &[2, 3, 40, 500]),
            (&[2, 3, 4, 5], &[1]),
        ];
        for (sa, sb) in cases {
            let values = |shape: &[usize], k: f32| -> Vec<f32> {
                (0..shape.iter().product::<usize>()).map(|i| ((i + 1) as f32 * k).sin()).collect()
            };
            let a = Tensor::from_f32(sa, values(sa, 0.37), &device);
            let b = Tensor::from_f32(sb, values(sb, 1.3), &device);
            let fast = try_binary(&a, &b, |x, y| x / y).expect("a block broadcast");
            let (a, b, _) = crate::tensor::broadcast_pair(a, b).expect("broadcastable");
            let burn = Tensor::from_dispatch(Dispatch::float_div(a.into_dispatch(), b.into_dispatch()));
            assert_eq!(fast.shape(), burn.shape(), "{sa:?} {sb:?}");
            let bits = |t: &Tensor| t.to_f32_vec().into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&burn), "{sa:?} {sb:?}");
        }
    }
}
