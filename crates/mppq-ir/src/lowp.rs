//! Low-precision element codes of ONNX: the FP8 formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ),
//! FP4 E2M1, the E8M0 scale type and the packed 4/2-bit integers. Decoding gives the exact
//! value (every code is exact in f32); encoding rounds an f32 the way ONNX's `Cast` does
//! (nearest, ties to even; `saturate` decides what an overflow becomes), so
//! `encode(decode(c)) == c` for every code that is not a NaN.
//!
//! [`round_to_precision`] is the one bit-exact "round to `m` mantissa bits with subnormals"
//! routine of the workspace: the executor's fake quantization rounds with it too.

use crate::dtype::{DataType, ElementWidth};

/// How a small float format spends its special codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Specials {
    /// IEEE style: the top exponent holds ±∞ (mantissa 0) and NaNs (E5M2).
    Ieee,
    /// "Finite": no infinities, NaN only at `S.1111.111` (E4M3FN).
    Finite,
    /// "Finite, unsigned zero": no infinities, no −0; the code `0x80` (−0's) is the only NaN.
    Fnuz,
    /// Neither infinities nor NaN (E2M1): everything saturates; NaN becomes the zero of the
    /// opposite sign (+NaN → −0), as ml_dtypes, hence ONNX's reference, does.
    None,
}

/// A sign + exponent + mantissa format of at most 8 bits (the FP8 and FP4 types of ONNX).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiniFloat {
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    bias: i32,
    /// Largest finite value.
    pub max: f32,
    specials: Specials,
}

impl MiniFloat {
    /// FLOAT8E4M3FN: bias 7, max 448, no infinities, NaN = `S.1111.111`.
    pub const E4M3FN: MiniFloat =
        MiniFloat { exponent_bits: 4, mantissa_bits: 3, bias: 7, max: 448.0, specials: Specials::Finite };
    /// FLOAT8E4M3FNUZ: bias 8, max 240, NaN = `0x80`, no −0.
    pub const E4M3FNUZ: MiniFloat =
        MiniFloat { exponent_bits: 4, mantissa_bits: 3, bias: 8, max: 240.0, specials: Specials::Fnuz };
    /// FLOAT8E5M2: IEEE style, bias 15, max 57344, ±∞.
    pub const E5M2: MiniFloat =
        MiniFloat { exponent_bits: 5, mantissa_bits: 2, bias: 15, max: 57344.0, specials: Specials::Ieee };
    /// FLOAT8E5M2FNUZ: bias 16, max 57344, NaN = `0x80`, no −0.
    pub const E5M2FNUZ: MiniFloat =
        MiniFloat { exponent_bits: 5, mantissa_bits: 2, bias: 16, max: 57344.0, specials: Specials::Fnuz };
    /// FLOAT4E2M1: bias 1, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no specials.
    pub const E2M1: MiniFloat =
        MiniFloat { exponent_bits: 2, mantissa_bits: 1, bias: 1, max: 6.0, specials: Specials::None };

    /// The format of an ONNX type (`None` for every type that is not FP8 E4M3/E5M2 or FP4).
    pub fn of(dtype: DataType) -> Option<Self> {
        Some(match dtype {
            DataType::Float8E4M3FN => Self::E4M3FN,
            DataType::Float8E4M3FNUZ => Self::E4M3FNUZ,
            DataType::Float8E5M2 => Self::E5M2,
            DataType::Float8E5M2FNUZ => Self::E5M2FNUZ,
            DataType::Float4E2M1 => Self::E2M1,
            _ => return None,
        })
    }

    /// Bits of a code (8 or 4).
    pub fn bits(&self) -> u32 {
        1 + self.exponent_bits + self.mantissa_bits
    }

    /// Exponent of the smallest normal value (subnormals share its quantum).
    pub fn min_exponent(&self) -> i32 {
        1 - self.bias
    }

    /// Whether the format has infinities (only E5M2).
    pub fn has_inf(&self) -> bool {
        self.specials == Specials::Ieee
    }

    fn sign_bit(&self) -> u8 {
        1 << (self.bits() - 1)
    }

    fn exponent_mask(&self) -> u8 {
        ((1u32 << self.exponent_bits) - 1) as u8
    }

    fn mantissa_mask(&self) -> u8 {
        ((1u32 << self.mantissa_bits) - 1) as u8
    }

    /// The value of `code` (bits above the format's width are ignored).
    pub fn decode(&self, code: u8) -> f32 {
        let code = code & (((1u32 << self.bits()) - 1) as u8);
        let negative = code & self.sign_bit() != 0;
        let exponent = (code >> self.mantissa_bits) & self.exponent_mask();
        let mantissa = code & self.mantissa_mask();
        match self.specials {
            Specials::Fnuz if code == self.sign_bit() => return f32::NAN,
            Specials::Finite if exponent == self.exponent_mask() && mantissa == self.mantissa_mask() => {
                return if negative { -f32::NAN } else { f32::NAN };
            }
            Specials::Ieee if exponent == self.exponent_mask() => {
                let special = if mantissa == 0 { f32::INFINITY } else { f32::NAN };
                return if negative { -special } else { special };
            }
            _ => {}
        }
        let m = self.mantissa_bits as i32;
        let magnitude = if exponent == 0 {
            f64::from(mantissa) * pow2(self.min_exponent() - m)
        } else {
            f64::from((1u32 << m) + u32::from(mantissa)) * pow2(i32::from(exponent) - self.bias - m)
        };
        let v = magnitude as f32;
        if negative { -v } else { v }
    }

    /// The code of the format's NaN for a value of this sign.
    fn nan_code(&self, negative: bool) -> u8 {
        let sign = if negative { self.sign_bit() } else { 0 };
        match self.specials {
            Specials::Fnuz => self.sign_bit(),
            // All exponent and mantissa bits set (E5M2: a NaN too).
            Specials::Finite | Specials::Ieee => sign | (self.sign_bit() - 1),
            // No NaN: ml_dtypes (ONNX's reference) gives a zero of the opposite sign.
            Specials::None => sign ^ self.sign_bit(),
        }
    }

    /// Rounds `v` to the nearest code, ties to even. An overflow (±∞, or a value whose rounding
    /// exceeds the largest finite value) becomes ±max when `saturate`, else ±∞ (E5M2) or NaN
    /// (the other FP8 formats), as ONNX's Cast (opset 19+) specifies. FP4 always saturates.
    pub fn encode(&self, v: f32, saturate: bool) -> u8 {
        self.encode_f64(f64::from(v), saturate)
    }

    /// [`Self::encode`] of an f64 (rounded once, not through f32).
    pub fn encode_f64(&self, v: f64, saturate: bool) -> u8 {
        let negative = v.is_sign_negative();
        if v.is_nan() {
            return self.nan_code(negative);
        }
        let sign = if negative { self.sign_bit() } else { 0 };
        let m = self.mantissa_bits as i32;
        let max_code = sign | (self.max_magnitude_code());
        let overflow = || {
            if saturate || self.specials == Specials::None {
                max_code
            } else if self.specials == Specials::Ieee {
                sign | (self.exponent_mask() << self.mantissa_bits)
            } else {
                self.nan_code(negative)
            }
        };
        if v.is_infinite() {
            return overflow();
        }
        let r = round_to_precision(v.abs(), self.mantissa_bits, self.min_exponent());
        if r > f64::from(self.max) {
            return overflow();
        }
        if r == 0.0 {
            // FNUZ has no −0: a negative value that rounds to zero is +0.
            return if self.specials == Specials::Fnuz { 0 } else { sign };
        }
        let e = exponent_of(r);
        let bits = if e < self.min_exponent() {
            // Subnormal: exponent field 0, mantissa = r / 2^(emin − m) (an integer < 2^m).
            (r * pow2(m - self.min_exponent())) as u8
        } else {
            let field = (e + self.bias) as u8;
            let mantissa = (r * pow2(m - e)) as u32 - (1u32 << m);
            (field << self.mantissa_bits) | mantissa as u8
        };
        sign | bits
    }

    /// The code (without sign) of the largest finite value.
    fn max_magnitude_code(&self) -> u8 {
        match self.specials {
            // Exponent field all ones but the last mantissa code (E4M3FN), or one exponent below
            // the top (E5M2).
            Specials::Finite => (self.exponent_mask() << self.mantissa_bits) | (self.mantissa_mask() - 1),
            Specials::Ieee => ((self.exponent_mask() - 1) << self.mantissa_bits) | self.mantissa_mask(),
            Specials::Fnuz | Specials::None => (self.exponent_mask() << self.mantissa_bits) | self.mantissa_mask(),
        }
    }

    /// `v` rounded to this format (its value): `decode(encode(v, saturate))`.
    pub fn round(&self, v: f32, saturate: bool) -> f32 {
        self.decode(self.encode(v, saturate))
    }
}

/// Rounds a magnitude `a ≥ 0` to `mantissa_bits` bits after the leading one, nearest with ties
/// to even, with subnormals below `2^min_exponent` (they share its quantum). No upper bound:
/// the caller saturates. Exact for every finite `a`, `mantissa_bits ≤ 52` and
/// `min_exponent ≥ −1022` (the scalings are by powers of two and `round_ties_even` is exact).
pub fn round_to_precision(a: f64, mantissa_bits: u32, min_exponent: i32) -> f64 {
    if a == 0.0 || !a.is_finite() {
        return a;
    }
    let m = mantissa_bits.min(52) as i32;
    let e = exponent_of(a).max(min_exponent.max(-1022));
    scale(scale(a, m - e).round_ties_even(), e - m)
}

/// `x · 2^k` for |k| ≤ 2044, in two exact steps (each factor a normal f64).
fn scale(x: f64, k: i32) -> f64 {
    x * pow2(k / 2) * pow2(k - k / 2)
}

/// `floor(log2(a))` of a positive normal f64 (−1023 for a subnormal one).
fn exponent_of(a: f64) -> i32 {
    (((a.to_bits() >> 52) & 0x7ff) as i32) - 1023
}

/// 2^k as f64 for |k| ≤ 1022.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k) as u64) << 52)
}

/// How a value becomes an E8M0 power of two (`round_mode` of ONNX's Cast, opset 24+).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum E8M0Rounding {
    /// Away from zero (the next power of two up): ONNX's default.
    #[default]
    Up,
    /// Toward zero.
    Down,
    /// Nearest, ties up.
    Nearest,
}

impl E8M0Rounding {
    /// ONNX's `round_mode` attribute value (`up`, `down`, `nearest`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "up" => Self::Up,
            "down" => Self::Down,
            "nearest" => Self::Nearest,
            _ => return None,
        })
    }
}

/// The value of an E8M0 code: `2^(code − 127)`, NaN for `0xFF`.
pub fn e8m0_decode(code: u8) -> f32 {
    if code == 0xFF {
        return f32::NAN;
    }
    // 2^-127 is an f32 subnormal (bit 22); every other code is a normal f32 with that exponent.
    if code == 0 { f32::from_bits(0x0040_0000) } else { f32::from_bits(u32::from(code) << 23) }
}

/// The E8M0 code of `v`: ONNX's reference rule on the f32 bits (the sign is ignored, since
/// negative inputs are undefined; zero gives the smallest code 2^-127). The exponent field is
/// rounded by the fraction per `rounding`; a result above 2^127 saturates to it when
/// `saturate`, else is NaN. NaN stays NaN; ±∞ is the largest code when `saturate` (ONNX's
/// table), NaN otherwise. f32 subnormals, all below the second code 2^-126, round by value
/// between 2^-127 and 2^-126.
///
/// `Up` rounds up whenever the fraction is nonzero, as the spec says; ONNX 1.21's reference
/// tests only the fraction bits under `0x4FFFFF` and so rounds down when just bits 20–21 are
/// set (checked against it: every other input gives the reference's code).
pub fn e8m0_encode(v: f32, saturate: bool, rounding: E8M0Rounding) -> u8 {
    let bits = v.to_bits() & 0x7fff_ffff;
    let exponent = bits >> 23;
    let fraction = bits & 0x7f_ffff;
    if exponent == 0xFF {
        return if fraction == 0 && saturate { 0xFE } else { 0xFF };
    }
    if exponent == 0 {
        // value = fraction · 2^-149; code 0 is 2^-127 (fraction 2^22), code 1 is 2^-126.
        let half = 1u32 << 22;
        let up = match rounding {
            E8M0Rounding::Up => fraction > half,
            E8M0Rounding::Down => false,
            E8M0Rounding::Nearest => fraction >= half + (half >> 1),
        };
        return u8::from(up);
    }
    let up = match rounding {
        E8M0Rounding::Up => fraction != 0,
        E8M0Rounding::Down => false,
        // The guard bit decides; exactly halfway rounds up.
        E8M0Rounding::Nearest => fraction & 0x40_0000 != 0,
    };
    match (up, exponent) {
        (true, 0xFE) if saturate => 0xFE,
        (true, e) => (e + 1) as u8,
        (false, e) => e as u8,
    }
}

/// Whether `dtype` is one of the low-precision types this module codes: FP8, FP4, E8M0 or a
/// 4/2-bit integer.
pub fn is_low_precision(dtype: DataType) -> bool {
    MiniFloat::of(dtype).is_some() || matches!(dtype, DataType::Float8E8M0) || sub_byte_int(dtype).is_some()
}

/// `(bits, signed)` of a packed sub-byte integer type.
pub fn sub_byte_int(dtype: DataType) -> Option<(u32, bool)> {
    match (dtype.width(), dtype.is_integer()) {
        (ElementWidth::Bits(bits), true) => Some((bits as u32, dtype.is_signed_integer())),
        _ => None,
    }
}

/// `v` brought into a `bits`-wide integer type by two's complement wrap (discarding the higher
/// bits, as ONNX's Cast between fixed-point types does); signed types are sign-extended.
/// `bits` is taken in `1..=32`.
pub fn wrap_int(v: i64, bits: u32, signed: bool) -> i64 {
    let bits = bits.clamp(1, 32);
    let mask = (1i64 << bits) - 1;
    let low = v & mask;
    if signed && low >> (bits - 1) == 1 { low - (1i64 << bits) } else { low }
}

/// Packs integers of a sub-byte type (wrapped into its width), low bits first. `bits` is taken
/// in `1..=8`.
pub fn pack_sub_byte(bits: u32, values: &[i64]) -> Vec<u8> {
    let bits = bits.clamp(1, 8);
    let per_byte = (8 / bits) as usize;
    let mask = (1i64 << bits) - 1;
    values
        .chunks(per_byte)
        .map(|chunk| {
            chunk.iter().enumerate().fold(0u8, |byte, (k, v)| byte | (((v & mask) as u8) << (k as u32 * bits)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [(MiniFloat, &str); 5] = [
        (MiniFloat::E4M3FN, "E4M3FN"),
        (MiniFloat::E4M3FNUZ, "E4M3FNUZ"),
        (MiniFloat::E5M2, "E5M2"),
        (MiniFloat::E5M2FNUZ, "E5M2FNUZ"),
        (MiniFloat::E2M1, "E2M1"),
    ];

    #[test]
    fn every_code_round_trips_through_its_value() {
        for (fmt, name) in FORMATS {
            let mut nans = 0;
            for code in 0..(1u32 << fmt.bits()) as u16 {
                let code = code as u8;
                let v = fmt.decode(code);
                if v.is_nan() {
                    nans += 1;
                    continue;
                }
                // ±∞ (E5M2) saturates to ±max when asked to.
                let modes: &[bool] = if v.is_infinite() { &[false] } else { &[true, false] };
                for &saturate in modes {
                    let back = fmt.encode(v, saturate);
                    // FP4 and the FN formats: distinct zeros; FNUZ has no −0 (its code is NaN).
                    assert_eq!(back, code, "{name}: code {code:#04x} = {v} encodes to {back:#04x}");
                }
            }
            let want = match name {
                "E4M3FN" => 2,
                "E4M3FNUZ" | "E5M2FNUZ" => 1,
                "E5M2" => 6,
                _ => 0,
            };
            assert_eq!(nans, want, "{name} NaN codes");
        }
    }

    #[test]
    fn largest_values_and_specials_decode_as_onnx_defines() {
        assert_eq!(MiniFloat::E4M3FN.decode(0x7E), 448.0);
        assert!(MiniFloat::E4M3FN.decode(0x7F).is_nan());
        assert_eq!(MiniFloat::E4M3FN.decode(0x01), 2f32.powi(-9)); // smallest subnormal
        assert_eq!(MiniFloat::E4M3FNUZ.decode(0x7F), 240.0);
        assert!(MiniFloat::E4M3FNUZ.decode(0x80).is_nan());
        assert_eq!(MiniFloat::E4M3FNUZ.decode(0x01), 2f32.powi(-10));
        assert_eq!(MiniFloat::E5M2.decode(0x7B), 57344.0);
        assert_eq!(MiniFloat::E5M2.decode(0x7C), f32::INFINITY);
        assert_eq!(MiniFloat::E5M2.decode(0xFC), f32::NEG_INFINITY);
        assert!(MiniFloat::E5M2.decode(0x7D).is_nan());
        assert_eq!(MiniFloat::E5M2FNUZ.decode(0x7F), 57344.0);
        assert_eq!(MiniFloat::E5M2FNUZ.decode(0x01), 2f32.powi(-17));
        let fp4: Vec<f32> = (0..16).map(|c| MiniFloat::E2M1.decode(c)).collect();
        assert_eq!(fp4[..8], [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(fp4[8..], [-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]);
        assert!(fp4[8].is_sign_negative());
    }

    #[test]
    fn rounding_is_nearest_ties_to_even() {
        let e4 = MiniFloat::E4M3FN;
        // 17 lies between 16 and 18 (quantum 2 in [16, 32)): a tie, to the even mantissa 16.
        assert_eq!(e4.round(17.0, true), 16.0);
        assert_eq!(e4.round(19.0, true), 20.0); // tie between 18 (odd) and 20 (even)
        assert_eq!(e4.round(17.01, true), 18.0);
        // Subnormal ties: 2^-10 is half the smallest subnormal 2^-9: to even (0).
        assert_eq!(e4.round(2f32.powi(-10), true), 0.0);
        assert_eq!(e4.round(3.0 * 2f32.powi(-10), true), 2.0 * 2f32.powi(-9));
        // The ONNX test values.
        assert_eq!(e4.round(0.478_925_47, true), 0.468_75);
        assert_eq!(MiniFloat::E5M2.round(0.478_925_47, true), 0.5);
        let fp4 = MiniFloat::E2M1;
        assert_eq!(fp4.round(0.25, true), 0.0);
        assert_eq!(fp4.round(0.75, true), 1.0);
        assert_eq!(fp4.round(5.0, true), 4.0);
        assert_eq!(fp4.round(-3.5, true), -4.0);
        assert_eq!(fp4.round(1.05, true), 1.0);
    }

    #[test]
    fn saturate_and_no_saturate_follow_the_cast_tables() {
        let e4 = MiniFloat::E4M3FN;
        assert_eq!(e4.round(1e6, true), 448.0);
        assert_eq!(e4.round(f32::NEG_INFINITY, true), -448.0);
        assert!(e4.round(1e6, false).is_nan());
        assert!(e4.round(f32::INFINITY, false).is_nan());
        // 464 is the tie between 448 and 480 (the NaN code's value): even is 448.
        assert_eq!(e4.round(464.0, false), 448.0);
        assert!(e4.round(465.0, false).is_nan());
        assert_eq!(e4.encode(-1e6, false), 0xFF); // −NaN keeps its sign in FN
        let e5 = MiniFloat::E5M2;
        assert_eq!(e5.round(1e6, true), 57344.0);
        assert_eq!(e5.round(1e6, false), f32::INFINITY);
        assert_eq!(e5.round(-1e6, false), f32::NEG_INFINITY);
        assert_eq!(e5.round(f32::INFINITY, true), 57344.0);
        assert_eq!(e5.round(f32::NEG_INFINITY, false), f32::NEG_INFINITY);
        // 61440 is the tie between 57344 (odd mantissa) and 65536 (even): overflows.
        assert_eq!(e5.round(61440.0, false), f32::INFINITY);
        assert_eq!(e5.round(61439.0, false), 57344.0);
        for fnuz in [MiniFloat::E4M3FNUZ, MiniFloat::E5M2FNUZ] {
            assert_eq!(fnuz.encode(f32::NAN, true), 0x80);
            assert_eq!(fnuz.encode(-f32::NAN, false), 0x80);
            assert_eq!(fnuz.encode(f32::INFINITY, false), 0x80);
            assert_eq!(fnuz.encode(-1e9, false), 0x80);
            assert_eq!(fnuz.round(-1e9, true), -fnuz.max);
            // No −0: −0 and negative values that round to zero are +0.
            assert_eq!(fnuz.encode(-0.0, true), 0x00);
            assert_eq!(fnuz.encode(-1e-30, false), 0x00);
        }
        assert_eq!(MiniFloat::E4M3FNUZ.round(1e6, true), 240.0);
        // FP4 saturates whatever is asked; NaN becomes −0.
        assert_eq!(MiniFloat::E2M1.round(f32::INFINITY, false), 6.0);
        assert_eq!(MiniFloat::E2M1.round(-9.0, false), -6.0);
        assert_eq!(MiniFloat::E2M1.encode(f32::NAN, true), 0x8);
        assert_eq!(MiniFloat::E2M1.encode(-f32::NAN, true), 0x0);
        // Zeros keep their sign where the format has −0.
        assert_eq!(MiniFloat::E4M3FN.encode(-0.0, true), 0x80);
        assert_eq!(MiniFloat::E4M3FN.encode(-1e-7, true), 0x80);
    }

    #[test]
    fn e8m0_codes_are_powers_of_two() {
        for code in 0..=254u8 {
            let v = e8m0_decode(code);
            assert_eq!(f64::from(v), 2f64.powi(i32::from(code) - 127), "code {code}");
            for r in [E8M0Rounding::Up, E8M0Rounding::Down, E8M0Rounding::Nearest] {
                assert_eq!(e8m0_encode(v, true, r), code, "code {code} {r:?}");
            }
        }
        assert!(e8m0_decode(0xFF).is_nan());
        assert_eq!(e8m0_encode(f32::NAN, true, E8M0Rounding::Up), 0xFF);
    }

    #[test]
    fn e8m0_rounding_modes() {
        use E8M0Rounding::*;
        let enc = |v: f32, r| e8m0_decode(e8m0_encode(v, true, r));
        // ONNX's test values (round up, saturate).
        let inputs = [0.0, 0.124, 0.25, 0.5, 1.1, 2.0, 4.0, 8.0];
        let want = [2f32.powi(-127), 0.125, 0.25, 0.5, 2.0, 2.0, 4.0, 8.0];
        for (x, w) in inputs.iter().zip(want) {
            assert_eq!(enc(*x, Up), w, "{x}");
        }
        assert_eq!(enc(1.1, Down), 1.0);
        assert_eq!(enc(1.4, Nearest), 1.0);
        assert_eq!(enc(1.5, Nearest), 2.0); // halfway (in the exponent's mantissa) rounds up
        assert_eq!(enc(1.6, Nearest), 2.0);
        assert_eq!(enc(3.0, Down), 2.0);
        // Above 2^127: saturate, or NaN.
        let big = f32::MAX;
        assert_eq!(e8m0_encode(big, true, Up), 0xFE);
        assert_eq!(e8m0_encode(big, false, Up), 0xFF);
        assert_eq!(e8m0_encode(big, false, Down), 0xFE);
        assert_eq!(e8m0_encode(f32::INFINITY, true, Up), 0xFE);
        assert_eq!(e8m0_encode(f32::INFINITY, false, Up), 0xFF);
        // Subnormal inputs, by value between 2^-127 and 2^-126.
        let sub = |f: u32| f32::from_bits(f);
        assert_eq!(e8m0_encode(sub(0x0040_0001), true, Up), 1);
        assert_eq!(e8m0_encode(sub(0x0000_0001), true, Up), 0);
        assert_eq!(e8m0_encode(sub(0x0060_0000), true, Nearest), 1);
        assert_eq!(e8m0_encode(sub(0x005F_FFFF), true, Nearest), 0);
        assert_eq!(E8M0Rounding::from_name("nearest"), Some(Nearest));
        assert_eq!(E8M0Rounding::from_name("even"), None);
    }

    #[test]
    fn sub_byte_integers_wrap_and_pack_low_bits_first() {
        assert_eq!(wrap_int(-9, 4, true), 7);
        assert_eq!(wrap_int(8, 4, true), -8);
        assert_eq!(wrap_int(-1, 4, false), 15);
        assert_eq!(wrap_int(-3, 2, false), 1);
        assert_eq!(wrap_int(2, 2, true), -2);
        assert_eq!(wrap_int(3, 2, true), -1);
        assert_eq!(pack_sub_byte(4, &[7, -8, 1]), vec![0x87, 0x01]);
        assert_eq!(pack_sub_byte(2, &[1, -2, -1, 0, 1]), vec![0b00_11_10_01, 0b01]);
        assert_eq!(sub_byte_int(DataType::Int2), Some((2, true)));
        assert_eq!(sub_byte_int(DataType::Uint4), Some((4, false)));
        assert_eq!(sub_byte_int(DataType::Float4E2M1), None);
        assert!(is_low_precision(DataType::Float8E8M0));
        assert!(!is_low_precision(DataType::BFloat16));
    }
}
