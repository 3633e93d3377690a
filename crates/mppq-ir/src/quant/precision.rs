//! Target precision: the numeric format an operation runs in, independent of which platform
//! (runtime, chip) runs the model.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetPrecision {
    /// Not decided yet (before dispatch).
    #[default]
    Unspecified,
    Fp32,
    Fp16,
    Int8,
    Int16,
    Int4,
    /// Linear integer quantization below 8 bits other than 4 (bits live in the tensor configs).
    LowBit,
    Fp8E4M3,
    Fp8E5M2,
    /// Weights quantized (block-wise INT4/INT8, `MatMulNBits`), activations float.
    WeightOnly,
    /// Shape-or-index: integer shape arithmetic that must stay exact and never be quantized.
    Soi,
}

impl TargetPrecision {
    /// Whether operations of this precision get quantization configs.
    pub fn is_quantized(self) -> bool {
        matches!(
            self,
            Self::Int8 | Self::Int16 | Self::Int4 | Self::LowBit | Self::Fp8E4M3 | Self::Fp8E5M2 | Self::WeightOnly
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Fp32 => "fp32",
            Self::Fp16 => "fp16",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int4 => "int4",
            Self::LowBit => "lowbit",
            Self::Fp8E4M3 => "fp8_e4m3",
            Self::Fp8E5M2 => "fp8_e5m2",
            Self::WeightOnly => "weight_only",
            Self::Soi => "soi",
        }
    }
}

impl std::fmt::Display for TargetPrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
