//! Lifecycle state of a tensor quantization config.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantizationState {
    /// Created, not calibrated: must not be used for simulation yet.
    #[default]
    Initial,
    /// Calibrated: scale/offset set, fake-quant applies.
    Activated,
    /// The quantized value has been written into the parameter itself.
    Baked,
    /// Shares another config's parameters (see `dominated_by`); exported once, by the dominator.
    Overlapped,
    /// Derived from other configs (e.g. bias = s_in · s_w), not calibrated itself.
    Passive,
    /// Passive and not derived yet.
    PassiveInit,
    /// Passive and baked into the parameter.
    PassiveBaked,
    /// Deliberately left in float.
    Fp32,
    /// Shape-or-index value: never quantized.
    Soi,
}

impl QuantizationState {
    /// Whether fake-quant runs for a config in this state. `Overlapped` is not active (another
    /// config quantizes the tensor), nor are the baked states (the parameter already holds its
    /// quantized value, and quantizing it again would be a no-op at best).
    pub fn is_active(self) -> bool {
        matches!(self, Self::Activated | Self::Passive)
    }

    /// Whether the parameter already holds its quantized value.
    pub fn is_baked(self) -> bool {
        matches!(self, Self::Baked | Self::PassiveBaked)
    }
}

#[cfg(test)]
mod tests {
    use super::QuantizationState::{self, *};

    #[test]
    fn only_activated_and_passive_are_simulated() {
        let all = [Initial, Activated, Baked, Overlapped, Passive, PassiveInit, PassiveBaked, Fp32, Soi];
        let active: Vec<QuantizationState> = all.into_iter().filter(|s| s.is_active()).collect();
        assert_eq!(active, vec![Activated, Passive]);
        let baked: Vec<QuantizationState> = all.into_iter().filter(|s| s.is_baked()).collect();
        assert_eq!(baked, vec![Baked, PassiveBaked]);
    }
}
