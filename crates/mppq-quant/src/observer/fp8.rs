//! Rounding to a small floating format (FP8 E4M3 / E5M2 and the like): IEEE-style with
//! subnormals, round half to even (`mppq_ir::lowp::round_to_precision`, the executor's and
//! the ONNX casts' rounding), saturating at the format's largest finite value.

/// Rounds `y` to the nearest value of a float format with `exponent_bits`, `mantissa_bits`
/// and largest finite magnitude `max` (E4M3: 4, 3, 448; E5M2: 5, 2, 57344); saturates.
pub fn fp8_round(y: f64, exponent_bits: u32, mantissa_bits: u32, max: f64) -> f64 {
    if y == 0.0 || !y.is_finite() {
        return if y.is_nan() { 0.0 } else { y.clamp(-max, max) };
    }
    let bias = (1i32 << (exponent_bits.clamp(1, 11) - 1)) - 1;
    let a = y.abs().min(max);
    let q = mppq_ir::lowp::round_to_precision(a, mantissa_bits, 1 - bias).min(max);
    q.copysign(y)
}
