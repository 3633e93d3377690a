//! Rounding policies for quantization. The scalar functions here are the reference every
//! tensor implementation (CPU or GPU kernels) must agree with, negative ties included.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundingPolicy {
    /// Banker's rounding: ties go to the even integer (ONNX QuantizeLinear's rule).
    #[default]
    HalfEven,
    /// Ties go towards +∞.
    HalfUp,
    /// Ties go towards −∞.
    HalfDown,
    HalfTowardsZero,
    HalfAwayFromZero,
    Ceil,
    Floor,
}

impl RoundingPolicy {
    pub const ALL: [RoundingPolicy; 7] = [
        Self::HalfEven,
        Self::HalfUp,
        Self::HalfDown,
        Self::HalfTowardsZero,
        Self::HalfAwayFromZero,
        Self::Ceil,
        Self::Floor,
    ];

    /// Rounds `x` to an integer value. Computed in f64, where `x ± 0.5` is exact for every f32
    /// input, so no tie is created or lost by the addition.
    pub fn round(self, x: f64) -> f64 {
        match self {
            Self::HalfEven => x.round_ties_even(),
            Self::HalfUp => (x + 0.5).floor(),
            Self::HalfDown => (x - 0.5).ceil(),
            Self::HalfTowardsZero => x.signum() * (x.abs() - 0.5).ceil(),
            Self::HalfAwayFromZero => x.round(),
            Self::Ceil => x.ceil(),
            Self::Floor => x.floor(),
        }
    }

    pub fn round_f32(self, x: f32) -> f32 {
        self.round(f64::from(x)) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::RoundingPolicy::{self, *};

    #[test]
    fn ties_including_negative() {
        let cases: [(RoundingPolicy, [f64; 6]); 7] = [
            //           2.5   -2.5   1.5  -1.5  0.5  -0.5
            (HalfEven, [2.0, -2.0, 2.0, -2.0, 0.0, -0.0]),
            (HalfUp, [3.0, -2.0, 2.0, -1.0, 1.0, 0.0]),
            (HalfDown, [2.0, -3.0, 1.0, -2.0, 0.0, -1.0]),
            (HalfTowardsZero, [2.0, -2.0, 1.0, -1.0, 0.0, 0.0]),
            (HalfAwayFromZero, [3.0, -3.0, 2.0, -2.0, 1.0, -1.0]),
            (Ceil, [3.0, -2.0, 2.0, -1.0, 1.0, 0.0]),
            (Floor, [2.0, -3.0, 1.0, -2.0, 0.0, -1.0]),
        ];
        for (policy, expected) in cases {
            for (x, want) in [2.5, -2.5, 1.5, -1.5, 0.5, -0.5].into_iter().zip(expected) {
                assert_eq!(policy.round(x), want, "{policy:?}({x})");
            }
        }
    }

    #[test]
    fn non_ties_round_to_nearest_for_half_policies() {
        for p in [HalfEven, HalfUp, HalfDown, HalfTowardsZero, HalfAwayFromZero] {
            assert_eq!(p.round(2.4), 2.0);
            assert_eq!(p.round(-2.6), -3.0);
            // Largest f32 below 0.5 must not become 1 through an inexact x + 0.5.
            assert_eq!(p.round_f32(0.499_999_97), 0.0, "{p:?}");
        }
    }
}
