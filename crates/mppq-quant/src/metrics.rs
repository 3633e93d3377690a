//! Error metrics between a float reference and a quantized result.

/// Signal-to-noise ratio in dB: `10·log10(Σ ref² / Σ (ref − q)²)`; infinite when equal.
pub fn snr_db(reference: &[f32], quantized: &[f32]) -> f64 {
    let (signal, noise) = reference.iter().zip(quantized).fold((0f64, 0f64), |(s, n), (r, q)| {
        let (r, q) = (f64::from(*r), f64::from(*q));
        (s + r * r, n + (r - q) * (r - q))
    });
    if noise == 0.0 { f64::INFINITY } else { 10.0 * (signal / noise).log10() }
}

/// Cosine similarity of two vectors (1 for identical directions).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (dot, na, nb) = a.iter().zip(b).fold((0f64, 0f64, 0f64), |(d, x, y), (p, q)| {
        let (p, q) = (f64::from(*p), f64::from(*q));
        (d + p * q, x + p * p, y + q * q)
    });
    if na == 0.0 || nb == 0.0 { if na == nb { 1.0 } else { 0.0 } } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn snr_and_cosine_values() {
        assert!((super::snr_db(&[1.0, 1.0], &[1.1, 0.9]) - 20.0).abs() < 1e-5);
        assert_eq!(super::snr_db(&[1.0], &[1.0]), f64::INFINITY);
        assert!((super::cosine(&[1.0, 0.0], &[0.0, 1.0])).abs() < 1e-12);
        assert!((super::cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
    }
}
