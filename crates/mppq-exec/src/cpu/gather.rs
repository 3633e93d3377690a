//! Weighted gathers along one axis of a row-major float32 buffer: Resize's interpolation taps
//! (`y[.., t, ..] = Σ_taps x[.., idx[t], ..] · w[t]`), in one pass per tap instead of Burn's
//! `select` (a threaded index computation with divisions per element: 12 % of a PP-OCR
//! detector's quantize time for its nearest-neighbour upsampling) and a broadcast multiply.
//! The same operations in the same order as the Burn path (`x·w`, then `acc + x·w` for each
//! further tap), so the same values.

use rayon::prelude::*;

/// Below this many output values the gather runs on the calling thread.
const THREADED_LEN: usize = 1 << 16;

/// `Σ_taps x[.., idx[t], ..] · w[t]` along `axis` of `x` (of `shape`), one `(idx, w)` per tap,
/// each of the output axis' length; `None` when there is no tap or an index is out of range.
pub fn weighted_taps(x: &[f32], shape: &[usize], axis: usize, taps: &[(Vec<i64>, Vec<f32>)]) -> Option<Vec<f32>> {
    let (len, out) = (*shape.get(axis)?, taps.first()?.0.len());
    let in_range = |idx: &[i64]| idx.iter().all(|&i| i >= 0 && (i as usize) < len);
    if !taps.iter().all(|(idx, w)| idx.len() == out && w.len() == out && in_range(idx)) {
        return None;
    }
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut y = vec![0f32; outer * out * inner];
    let block = |(o, dst): (usize, &mut [f32])| {
        let src = &x[o * len * inner..][..len * inner];
        for (k, (idx, w)) in taps.iter().enumerate() {
            for (t, row) in dst.chunks_exact_mut(inner).enumerate() {
                let from = &src[idx[t] as usize * inner..][..inner];
                if k == 0 {
                    row.iter_mut().zip(from).for_each(|(d, &v)| *d = v * w[t]);
                } else {
                    row.iter_mut().zip(from).for_each(|(d, &v)| *d += v * w[t]);
                }
            }
        }
    };
    if y.len() < THREADED_LEN || inner == 0 || out == 0 {
        y.chunks_exact_mut((out * inner).max(1)).enumerate().for_each(block);
    } else {
        y.par_chunks_exact_mut(out * inner).enumerate().for_each(block);
    }
    Some(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_and_weights_along_any_axis() {
        // x: [2, 3, 4] = 0..24; axis 1 → 2 outputs from rows (2, 0) weighted 0.5/1 plus row 1 ·2.
        let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let taps = vec![(vec![2, 0], vec![0.5, 1.0]), (vec![1, 1], vec![2.0, 2.0])];
        let y = weighted_taps(&x, &[2, 3, 4], 1, &taps).expect("in range");
        let want: Vec<f32> = (0..2)
            .flat_map(|o| {
                (0..2).flat_map(move |t| {
                    (0..4).map(move |i| {
                        let at = |r: usize| (o * 12 + r * 4 + i) as f32;
                        at([2, 0][t]) * [0.5, 1.0][t] + at(1) * 2.0
                    })
                })
            })
            .collect();
        assert_eq!(y, want);
        // The last axis (one value per row), large enough to run threaded.
        let x: Vec<f32> = (0..200_000).map(|v| v as f32).collect();
        let idx: Vec<i64> = (0..400).map(|t| t / 2).collect();
        let y = weighted_taps(&x, &[1000, 200], 1, &[(idx, vec![1.0; 400])]).expect("in range");
        assert!(y.iter().enumerate().all(|(i, &v)| v == ((i / 400) * 200 + (i % 400) / 2) as f32));
        assert!(weighted_taps(&x, &[1000, 200], 1, &[(vec![200], vec![1.0])]).is_none());
    }
}
