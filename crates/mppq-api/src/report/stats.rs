//! Bounded-memory error statistics between a float tensor and its quantized counterpart: exact
//! running sums (SNR, cosine, MSE: [`Moments`], at home in `mppq_quant::metrics`) and a
//! fixed-size paired sample for histograms.

pub use mppq_quant::metrics::Moments;

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
