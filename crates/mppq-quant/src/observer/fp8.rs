//! Rounding to a small floating format (FP8 E4M3 / E5M2 and the like): IEEE-style with
//! subnormals, round half to even, saturating at the format's largest finite value.

/// Rounds `y` to the nearest value of a float format with `exponent_bits`, `mantissa_bits`
/// and largest finite magnitude `max` (E4M3: 4, 3, 448; E5M2: 5, 2, 57344); saturates.
pub fn fp8_round(y: f64, exponent_bits: u32, mantissa_bits: u32, max: f64) -> f64 {
    if y == 0.0 || !y.is_finite() {
        return if y.is_nan() { 0.0 } else { y.clamp(-max, max) };
    }
    let bias = (1i32 << (exponent_bits.clamp(1, 11) - 1)) - 1;
    let min_exp = 1 - bias;
    let a = y.abs().min(max);
    let mut e = a.log2().floor() as i32;
    if 2f64.powi(e) > a {
        e -= 1;
    }
    let e = e.max(min_exp);
    let step = 2f64.powi(e - mantissa_bits as i32);
    let q = ((a / step).round_ties_even() * step).min(max);
    q.copysign(y)
}
