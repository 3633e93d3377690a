//! Quantization policy: a set of property flags, restricted to the combinations that mean
//! something. Building a policy validates it, so an invalid one cannot exist.

use crate::error::{IrError, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One property flag of a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantizationProperty {
    PerTensor,
    PerChannel,
    Linear,
    Floating,
    Symmetric,
    Asymmetric,
    PowerOf2,
    Dynamic,
}

impl QuantizationProperty {
    const ALL: [QuantizationProperty; 8] = [
        Self::PerTensor,
        Self::PerChannel,
        Self::Linear,
        Self::Floating,
        Self::Symmetric,
        Self::Asymmetric,
        Self::PowerOf2,
        Self::Dynamic,
    ];

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A valid combination of [`QuantizationProperty`] flags: exactly one granularity (per-tensor or
/// per-channel), one mapping (linear or floating), one symmetry; floating is symmetric and never
/// dynamic; power-of-2 scales and dynamic (runtime) ranges are optional.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantizationPolicy(u8);

impl QuantizationPolicy {
    pub fn new(properties: &[QuantizationProperty]) -> Result<Self> {
        use QuantizationProperty::*;
        let bits = properties.iter().fold(0u8, |b, p| b | p.bit());
        let has = |p: QuantizationProperty| bits & p.bit() != 0;
        let one_of = |a, b| has(a) != has(b);
        let problem = if !one_of(PerTensor, PerChannel) {
            Some("exactly one of per_tensor and per_channel is required")
        } else if !one_of(Linear, Floating) {
            Some("exactly one of linear and floating is required")
        } else if !one_of(Symmetric, Asymmetric) {
            Some("exactly one of symmetric and asymmetric is required")
        } else if has(Floating) && has(Asymmetric) {
            Some("floating quantization has no zero point: it must be symmetric")
        } else if has(Floating) && has(Dynamic) {
            Some("dynamic ranges are only defined for linear quantization")
        } else {
            None
        };
        match problem {
            Some(msg) => Err(IrError::InvalidQuantConfig(format!("{msg} (got {properties:?})"))),
            None => Ok(Self(bits)),
        }
    }

    /// The common linear integer policy.
    pub fn linear(symmetric: bool, per_channel: bool) -> Self {
        use QuantizationProperty::*;
        let mut bits = Linear.bit();
        bits |= if symmetric { Symmetric.bit() } else { Asymmetric.bit() };
        bits |= if per_channel { PerChannel.bit() } else { PerTensor.bit() };
        Self(bits)
    }

    /// The same policy with one parameter set for the whole tensor.
    pub fn per_tensor(self) -> Self {
        use QuantizationProperty::*;
        Self((self.0 & !PerChannel.bit()) | PerTensor.bit())
    }

    pub fn has(self, p: QuantizationProperty) -> bool {
        self.0 & p.bit() != 0
    }

    pub fn properties(self) -> Vec<QuantizationProperty> {
        QuantizationProperty::ALL.into_iter().filter(|p| self.has(*p)).collect()
    }

    pub fn is_per_channel(self) -> bool {
        self.has(QuantizationProperty::PerChannel)
    }

    pub fn is_symmetric(self) -> bool {
        self.has(QuantizationProperty::Symmetric)
    }

    pub fn is_floating(self) -> bool {
        self.has(QuantizationProperty::Floating)
    }

    pub fn is_power_of_2(self) -> bool {
        self.has(QuantizationProperty::PowerOf2)
    }

    /// Every valid policy (for tests and documentation).
    pub fn all_valid() -> Vec<Self> {
        (0u16..256)
            .filter_map(|b| {
                let props: Vec<_> = QuantizationProperty::ALL.into_iter().filter(|p| b as u8 & p.bit() != 0).collect();
                Self::new(&props).ok()
            })
            .collect()
    }
}

impl std::fmt::Debug for QuantizationPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.properties()).finish()
    }
}

impl Serialize for QuantizationPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.properties().serialize(s)
    }
}

impl<'de> Deserialize<'de> for QuantizationPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let props = Vec::<QuantizationProperty>::deserialize(d)?;
        Self::new(&props).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::QuantizationProperty::*;
    use super::*;

    #[test]
    fn exact_set_of_valid_combinations() {
        // 2 granularities × (linear: 2 symmetries, floating: symmetric only) × pow2 × dynamic(linear only)
        // = 2 × (2×2×2 + 1×2×1) = 20
        assert_eq!(QuantizationPolicy::all_valid().len(), 20);
        assert!(QuantizationPolicy::new(&[PerTensor, Linear, Asymmetric]).is_ok());
        assert!(QuantizationPolicy::new(&[PerChannel, Floating, Symmetric, PowerOf2]).is_ok());
    }

    #[test]
    fn invalid_combinations_are_typed_errors() {
        for bad in [
            vec![PerTensor, PerChannel, Linear, Symmetric],
            vec![PerTensor, Symmetric],
            vec![PerTensor, Linear, Symmetric, Asymmetric],
            vec![PerTensor, Floating, Asymmetric],
            vec![PerTensor, Floating, Symmetric, Dynamic],
        ] {
            let err = QuantizationPolicy::new(&bad).unwrap_err();
            assert!(matches!(err, IrError::InvalidQuantConfig(_)), "{bad:?}");
        }
    }

    #[test]
    fn serde_round_trip_and_rejects_invalid() {
        let p = QuantizationPolicy::linear(true, true);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"["per_channel","linear","symmetric"]"#);
        assert_eq!(serde_json::from_str::<QuantizationPolicy>(&json).unwrap(), p);
        assert!(serde_json::from_str::<QuantizationPolicy>(r#"["linear"]"#).is_err());
    }
}
