//! Bounded-memory error statistics between a float tensor and its quantized counterpart: exact
//! running sums (SNR, cosine, MSE) and a fixed-size paired sample for histograms.

use serde::{Deserialize, Serialize};

/// Running sums over every compared element, in f64. Exact (no sampling): SNR, cosine and MSE
/// derived from them equal the metrics computed on the concatenated full tensors.
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
        let energy = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
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

    /// `10·log10(Σfp² / Σ(fp−q)²)`; infinite when the runs agree exactly.
    pub fn snr_db(&self) -> f64 {
        if self.sum_err2 == 0.0 { f64::INFINITY } else { 10.0 * (self.sum_fp2 / self.sum_err2).log10() }
    }

    /// `Σfp·q / √(Σfp²·Σq²)`; 1 when both are all zero (same convention as `metrics::cosine`).
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

/// At most `cap` (float, quantized) pairs drawn from all batches: each batch offers a strided
/// subset of at most `cap` elements, and a seeded reservoir (algorithm R) keeps a uniform choice
/// among all offered ones. Deterministic for a given seed and data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairSample {
    pub fp: Vec<f32>,
    pub q: Vec<f32>,
    cap: usize,
    offered: u64,
    rng: u64,
}

impl PairSample {
    pub fn new(cap: usize, seed: u64) -> Self {
        // xorshift must not start at zero.
        Self { fp: Vec::new(), q: Vec::new(), cap, offered: 0, rng: seed | 1 }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn len(&self) -> usize {
        self.fp.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fp.is_empty()
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Offers one batch: at most `cap` elements, every `⌈n / cap⌉`-th one.
    pub fn offer(&mut self, fp: &[f32], q: &[f32]) {
        let n = fp.len().min(q.len());
        if self.cap == 0 || n == 0 {
            return;
        }
        let stride = n.div_ceil(self.cap);
        for i in (0..n).step_by(stride) {
            self.offered += 1;
            if self.fp.len() < self.cap {
                self.fp.push(fp[i]);
                self.q.push(q[i]);
            } else {
                let j = (self.next() % self.offered) as usize;
                if j < self.cap {
                    self.fp[j] = fp[i];
                    self.q[j] = q[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_of_different_lengths_count_as_all_error() {
        // A decoding loop that stopped two steps later: -10·log10((4 + 9 + 4 + 9 + 1 + 1) / 13).
        let m = Moments::unaligned(&[2.0, 3.0], &[2.0, 3.0, 1.0, 1.0]);
        assert_eq!(m.count, 4);
        assert!((m.snr_db() + 10.0 * (28.0f64 / 13.0).log10()).abs() < 1e-9, "{}", m.snr_db());
    }

    #[test]
    fn moments_match_direct_metrics() {
        let fp = [1.0f32, -2.0, 3.0, 0.5];
        let q = [1.1f32, -1.9, 2.8, 0.5];
        let (a, b) = (Moments::of(&fp[..2], &q[..2]), Moments::of(&fp[2..], &q[2..]));
        let mut m = a;
        m.merge(&b);
        assert_eq!(m.count, 4);
        assert!((m.snr_db() - mppq_quant::metrics::snr_db(&fp, &q)).abs() < 1e-9);
        assert!((m.cosine() - mppq_quant::metrics::cosine(&fp, &q)).abs() < 1e-12);
        let mse = (0.01 + 0.01 + 0.04) / 4.0;
        assert!((m.mse() - mse).abs() < 1e-7, "{}", m.mse());
        assert_eq!(Moments::of(&fp, &fp).snr_db(), f64::INFINITY);
        assert_eq!(Moments::of(&fp, &fp).cosine(), 1.0);
    }

    #[test]
    fn sample_never_exceeds_its_cap_and_keeps_pairs() {
        let mut s = PairSample::new(100, 7);
        for batch in 0..10 {
            let fp: Vec<f32> = (0..1000).map(|i| (batch * 1000 + i) as f32).collect();
            let q: Vec<f32> = fp.iter().map(|v| -v).collect();
            s.offer(&fp, &q);
            assert!(s.len() <= 100);
        }
        assert_eq!(s.len(), 100);
        assert!(s.fp.iter().zip(&s.q).all(|(a, b)| *a == -*b));
        // Later batches are represented, not only the first one.
        assert!(s.fp.iter().any(|v| *v >= 5000.0));
    }
}
