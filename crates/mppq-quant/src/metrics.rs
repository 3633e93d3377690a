//! Error metrics between a float reference and a quantized result: the one home of the
//! signal-to-noise ratio (SNR) and its sums.
//!
//! Two formulas of the SNR live here, and both stay: they agree mathematically but not in the
//! last bits, and each caller's results (pass decisions, budgets, reports) are kept bit for bit.
//! - [`snr_db_from_sums`], `10·log10(signal / noise)`: the metrics of two tensors ([`snr_db`],
//!   [`Moments::snr_db`]), from their energy sums directly;
//! - [`snr_db_from_ratio`], `−10·log10(noise / signal)`: the SNR of several graph outputs
//!   together ([`mean_snr_db`], as the pipeline's guard and the accuracy budget rank models), of a
//!   mean of per-output noise-to-signal ratios ([`OutputNoise`] sums them).

use serde::{Deserialize, Serialize};

/// SNR in dB from energy sums: `10·log10(signal / noise)`; ∞ when `noise` is 0 (an exact match).
/// The formula of two tensors' metrics ([`snr_db`], [`Moments::snr_db`]).
pub fn snr_db_from_sums(signal: f64, noise: f64) -> f64 {
    if noise == 0.0 { f64::INFINITY } else { 10.0 * (signal / noise).log10() }
}

/// SNR in dB of a noise-to-signal ratio: `−10·log10(ratio)`; ∞ for a ratio ≤ 0 (an exact
/// match). The formula of [`mean_snr_db`], which averages ratios, not decibels.
pub fn snr_db_from_ratio(noise_to_signal: f64) -> f64 {
    if noise_to_signal <= 0.0 { f64::INFINITY } else { -10.0 * noise_to_signal.log10() }
}

/// Noise power over signal power, the signal floored at `floor` (a silent reference counts its
/// noise against a signal of `floor`; each caller says why its floor is what it is).
pub fn noise_to_signal(noise: f64, signal: f64, floor: f64) -> f64 {
    noise / signal.max(floor)
}

/// The SNR of several outputs together, as the pipeline's guard and the accuracy budget rank
/// models: −10·log10 of the mean of their noise-to-signal ratios (∞ when there are none or all
/// match).
pub fn mean_snr_db(noise_to_signal: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = noise_to_signal.into_iter().fold((0.0, 0usize), |(s, n), r| (s + r, n + 1));
    snr_db_from_ratio(sum / n.max(1) as f64)
}

/// Signal-to-noise ratio in dB: `10·log10(Σ ref² / Σ (ref − q)²)`; infinite when equal.
pub fn snr_db(reference: &[f32], quantized: &[f32]) -> f64 {
    Moments::of(reference, quantized).snr_db()
}

/// Cosine similarity of two vectors (1 for identical directions, 1 when both are all zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    Moments::of(a, b).cosine()
}

/// The energy of `v`: `Σ v²`, each element squared in f64.
fn energy(v: &[f32]) -> f64 {
    v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>()
}

/// Per-output noise and signal energies of a graph's outputs, summed batch by batch: the sums
/// behind [`mean_snr_db`] for the pipeline's guard and the accuracy budget. The noise of one
/// element is `(want − have)²`, the difference taken in f32 and squared in f64; each batch's sum
/// is added to the running one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutputNoise {
    noise: Vec<f64>,
    signal: Vec<f64>,
}

impl OutputNoise {
    /// Sums of `outputs` outputs, all zero.
    pub fn new(outputs: usize) -> Self {
        Self { noise: vec![0.0; outputs], signal: vec![0.0; outputs] }
    }

    /// `outputs` outputs: new ones start at zero, extra ones are dropped (as `Vec::resize`).
    pub fn resize(&mut self, outputs: usize) {
        self.noise.resize(outputs, 0.0);
        self.signal.resize(outputs, 0.0);
    }

    /// Adds one batch of output `k`: `want` (the reference) against `have`, element by element
    /// over the shorter of the two.
    pub fn add(&mut self, k: usize, want: &[f32], have: &[f32]) {
        self.noise[k] += want.iter().zip(have).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>();
        self.signal[k] += energy(want);
    }

    /// Adds one batch of output `k` whose length differs between the runs (a decoding loop that
    /// stopped elsewhere): nothing is comparable, all of both is noise.
    pub fn add_unaligned(&mut self, k: usize, want: &[f32], have: &[f32]) {
        self.noise[k] += energy(want) + energy(have);
        self.signal[k] += energy(want);
    }

    /// Output `k`'s sums: (signal, noise).
    pub fn sums(&self, k: usize) -> (f64, f64) {
        (self.signal[k], self.noise[k])
    }

    /// Each output's noise-to-signal ratio, the signal floored at `floor` ([`noise_to_signal`]).
    pub fn ratios(&self, floor: f64) -> impl Iterator<Item = f64> + '_ {
        self.noise.iter().zip(&self.signal).map(move |(n, s)| noise_to_signal(*n, *s, floor))
    }

    /// The outputs' SNR together ([`mean_snr_db`] of [`Self::ratios`]).
    pub fn mean_snr_db(&self, floor: f64) -> f64 {
        mean_snr_db(self.ratios(floor))
    }
}

/// Running sums over every compared element of a float tensor and its quantized counterpart,
/// in f64. Exact (no sampling): SNR, cosine and MSE derived from them equal the metrics
/// computed on the concatenated full tensors.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Σ fp²
    pub sum_fp2: f64,
    /// Σ q²
    pub sum_q2: f64,
    /// Σ fp·q
    pub sum_fpq: f64,
    /// Σ (fp − q)²
    pub sum_err2: f64,
    /// Number of elements compared.
    pub count: u64,
}

impl Moments {
    /// The sums of one pair of equally long slices (f64 accumulation, element order).
    pub fn of(fp: &[f32], q: &[f32]) -> Self {
        let mut m = Moments::default();
        for (a, b) in fp.iter().zip(q) {
            let (a, b) = (f64::from(*a), f64::from(*b));
            m.sum_fp2 += a * a;
            m.sum_q2 += b * b;
            m.sum_fpq += a * b;
            m.sum_err2 += (a - b) * (a - b);
        }
        m.count = fp.len().min(q.len()) as u64;
        m
    }

    /// The sums of two tensors of different shapes (an output whose length depends on the data,
    /// as a decoding loop's): nothing lines up, all of both is error and nothing correlates.
    pub fn unaligned(fp: &[f32], q: &[f32]) -> Self {
        let (sum_fp2, sum_q2) = (energy(fp), energy(q));
        Moments { sum_fp2, sum_q2, sum_fpq: 0.0, sum_err2: sum_fp2 + sum_q2, count: fp.len().max(q.len()) as u64 }
    }

    /// Adds the sums of another batch.
    pub fn merge(&mut self, other: &Moments) {
        self.sum_fp2 += other.sum_fp2;
        self.sum_q2 += other.sum_q2;
        self.sum_fpq += other.sum_fpq;
        self.sum_err2 += other.sum_err2;
        self.count += other.count;
    }

    /// False when a NaN or infinity reached the sums (checked once per batch, not per element).
    pub fn is_finite(&self) -> bool {
        [self.sum_fp2, self.sum_q2, self.sum_fpq, self.sum_err2].iter().all(|s| s.is_finite())
    }

    /// `10·log10(Σfp² / Σ(fp−q)²)` ([`snr_db_from_sums`]); infinite when the runs agree exactly.
    pub fn snr_db(&self) -> f64 {
        snr_db_from_sums(self.sum_fp2, self.sum_err2)
    }

    /// `Σfp·q / √(Σfp²·Σq²)`; 1 when both are all zero, 0 when only one is.
    pub fn cosine(&self) -> f64 {
        if self.sum_fp2 == 0.0 || self.sum_q2 == 0.0 {
            if self.sum_fp2 == self.sum_q2 { 1.0 } else { 0.0 }
        } else {
            self.sum_fpq / (self.sum_fp2.sqrt() * self.sum_q2.sqrt())
        }
    }

    /// Mean squared error; 0 for an empty comparison.
    pub fn mse(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.sum_err2 / self.count as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snr_and_cosine_values() {
        assert!((snr_db(&[1.0, 1.0], &[1.1, 0.9]) - 20.0).abs() < 1e-5);
        assert_eq!(snr_db(&[1.0], &[1.0]), f64::INFINITY);
        assert!((cosine(&[1.0, 0.0], &[0.0, 1.0])).abs() < 1e-12);
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn outputs_of_different_lengths_count_as_all_error() {
        // A decoding loop that stopped two steps later: -10·log10((4 + 9 + 4 + 9 + 1 + 1) / 13).
        let m = Moments::unaligned(&[2.0, 3.0], &[2.0, 3.0, 1.0, 1.0]);
        assert_eq!(m.count, 4);
        assert!((m.snr_db() + 10.0 * (28.0f64 / 13.0).log10()).abs() < 1e-9, "{}", m.snr_db());
        let mut outputs = OutputNoise::new(1);
        outputs.add_unaligned(0, &[2.0, 3.0], &[2.0, 3.0, 1.0, 1.0]);
        assert!((outputs.mean_snr_db(1e-12) + 10.0 * (28.0f64 / 13.0).log10()).abs() < 1e-9);
    }

    #[test]
    fn moments_merge_batches() {
        let fp = [1.0f32, -2.0, 3.0, 0.5];
        let q = [1.1f32, -1.9, 2.8, 0.5];
        let (a, b) = (Moments::of(&fp[..2], &q[..2]), Moments::of(&fp[2..], &q[2..]));
        let mut m = a;
        m.merge(&b);
        assert_eq!(m.count, 4);
        assert!((m.snr_db() - snr_db(&fp, &q)).abs() < 1e-9);
        assert!((m.cosine() - cosine(&fp, &q)).abs() < 1e-12);
        let mse = (0.01 + 0.01 + 0.04) / 4.0;
        assert!((m.mse() - mse).abs() < 1e-7, "{}", m.mse());
        assert_eq!(Moments::of(&fp, &fp).snr_db(), f64::INFINITY);
        assert_eq!(Moments::of(&fp, &fp).cosine(), 1.0);
    }

    #[test]
    fn mean_snr_averages_ratios() {
        // Ratios 0.01 and 0.001: −10·log10(0.0055).
        assert!((mean_snr_db([0.01, 0.001]) + 10.0 * 0.0055f64.log10()).abs() < 1e-12);
        assert_eq!(mean_snr_db([]), f64::INFINITY);
        assert_eq!(mean_snr_db([0.0, 0.0]), f64::INFINITY);
        let mut outputs = OutputNoise::new(2);
        outputs.add(0, &[1.0, 1.0], &[1.1, 0.9]);
        outputs.add(1, &[0.0], &[0.5]);
        // Output 1 is silent: its noise 0.25 counts against the floor.
        let ratios: Vec<f64> = outputs.ratios(1e-12).collect();
        assert!((ratios[0] - 0.01).abs() < 1e-6 && ratios[1] == 0.25 / 1e-12, "{ratios:?}");
    }
}
