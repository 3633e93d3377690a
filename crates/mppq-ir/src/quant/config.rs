//! Tensor and operation quantization configs. A tensor config says how one input or output of
//! an operation is quantized; a config may be *dominated by* another, and then shares its
//! scale and offset (concat/add alignment, fused activations).

use super::{BlockGrid, ObserverKind, PairLimit, QuantBlock, QuantizationPolicy, QuantizationState, RoundingPolicy};
use crate::error::{IrError, Result};
use crate::graph::OpId;
use serde::{Deserialize, Serialize};

/// Which side of an operation a tensor config sits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigSide {
    Input,
    Output,
}

/// Where a tensor config lives: an operation, a side and a slot index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConfigLocation {
    pub op: OpId,
    pub side: ConfigSide,
    pub index: usize,
}

/// How one tensor is quantized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorQuantConfig {
    pub policy: QuantizationPolicy,
    pub rounding: RoundingPolicy,
    /// 2–16 for quantized values; up to 32 for biases (held in int32).
    pub num_of_bits: u32,
    /// Smallest and largest quantized value (for floating formats: the representable range).
    pub quant_min: i64,
    pub quant_max: i64,
    /// Floating formats only (e.g. E4M3: 4 and 3).
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    /// One value per tensor, or one per channel along `channel_axis`.
    pub scale: Vec<f32>,
    /// Zero point(s), integral; zero for symmetric policies.
    pub offset: Vec<f32>,
    pub channel_axis: Option<usize>,
    /// The observer that calibrates this config.
    pub observer: ObserverKind,
    pub state: QuantizationState,
    /// The config this one shares its parameters with, if any.
    pub dominated_by: Option<ConfigLocation>,
    /// Weights for a target whose integer kernels add code pairs in a saturating int16 (x86
    /// without VNNI): the pairs the rounded codes are kept within ([`PairLimit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_limit: Option<PairLimit>,
    /// Block-wise weights (weight-only INT4/INT8): one scale and zero point per block of the
    /// input-channel run of each output channel ([`super::block`]); `channel_axis` names the
    /// output channels. The scales may be negative (ONNX Runtime's symmetric block quantizer maps
    /// each block's largest magnitude onto the code −8, whatever its sign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<QuantBlock>,
}

impl TensorQuantConfig {
    /// A linear integer config with the usual range for `bits` (signed if symmetric).
    pub fn linear(bits: u32, symmetric: bool, channel_axis: Option<usize>) -> Result<Self> {
        if !(2..=16).contains(&bits) && bits != 32 {
            return Err(IrError::InvalidQuantConfig(format!("{bits} bits: use 2–16, or 32 for biases")));
        }
        let (quant_min, quant_max) =
            if symmetric { (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1) } else { (0, (1i64 << bits) - 1) };
        Ok(Self {
            policy: QuantizationPolicy::linear(symmetric, channel_axis.is_some()),
            rounding: RoundingPolicy::HalfEven,
            num_of_bits: bits,
            quant_min,
            quant_max,
            exponent_bits: 0,
            mantissa_bits: 0,
            scale: Vec::new(),
            offset: Vec::new(),
            channel_axis,
            observer: ObserverKind::Minmax,
            state: QuantizationState::Initial,
            dominated_by: None,
            pair_limit: None,
            block: None,
        })
    }

    /// A block-wise weight config: output channels on `channel_axis`, blocks of `block.size` along
    /// `block.axis` ([`super::block`]).
    pub fn blocked(bits: u32, symmetric: bool, channel_axis: usize, block: QuantBlock) -> Result<Self> {
        let c = Self { block: Some(block), ..Self::linear(bits, symmetric, Some(channel_axis))? };
        c.validate()?;
        Ok(c)
    }

    /// The block grid of this config on a tensor of `shape` (`None` when it is not block-wise).
    pub fn block_grid(&self, shape: &[usize]) -> Result<Option<BlockGrid>> {
        let (Some(block), Some(axis)) = (self.block, self.channel_axis) else { return Ok(None) };
        let grid = BlockGrid::new(shape, axis, block)?;
        if !self.scale.is_empty() {
            grid.check_params(self.scale.len(), shape)?;
        }
        Ok(Some(grid))
    }

    /// The same integer config at `bits`, its range in the same form: unsigned `[0, 2^b − 1]`,
    /// signed `[−2^(b−1), 2^(b−1) − 1]` or signed narrow `[−(2^(b−1) − 1), 2^(b−1) − 1]`.
    /// `None` for floating formats, calibrated configs and ranges of another form (a platform's
    /// own clamp), which only the platform knows how to widen.
    pub fn at_bits(&self, bits: u32) -> Option<Self> {
        let uncalibrated = matches!(self.state, QuantizationState::Initial | QuantizationState::PassiveInit);
        if self.policy.is_floating() || !uncalibrated || !(2..=16).contains(&bits) {
            return None;
        }
        let (n, half, new_half) = (self.num_of_bits, 1i64 << (self.num_of_bits - 1), 1i64 << (bits - 1));
        let (quant_min, quant_max) = match (self.quant_min, self.quant_max) {
            (0, max) if max == (1i64 << n) - 1 => (0, (1i64 << bits) - 1),
            (min, max) if min == -half && max == half - 1 => (-new_half, new_half - 1),
            (min, max) if min == -(half - 1) && max == half - 1 => (-(new_half - 1), new_half - 1),
            _ => return None,
        };
        Some(Self { num_of_bits: bits, quant_min, quant_max, ..self.clone() })
    }

    /// Makes an uncalibrated per-channel config per-tensor (one scale for the whole tensor);
    /// returns whether it changed. Calibrated configs are left alone.
    pub fn make_per_tensor(&mut self) -> bool {
        let uncalibrated = matches!(self.state, QuantizationState::Initial | QuantizationState::PassiveInit);
        if self.channel_axis.is_none() || !uncalibrated {
            return false;
        }
        self.policy = self.policy.per_tensor();
        self.channel_axis = None;
        self.block = None;
        self.scale.clear();
        self.offset.clear();
        true
    }

    /// Checks the config is internally consistent: bits and range, scale/offset shapes and
    /// values, and that per-channel configs name an axis.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(IrError::InvalidQuantConfig(m));
        // Wider than 16 bits only for biases, held in int32 (32, or 30 as PPQ's academic platform).
        if !(2..=32).contains(&self.num_of_bits) {
            return fail(format!("{} bits: use 2–16, or up to 32 for biases", self.num_of_bits));
        }
        if self.quant_min >= self.quant_max {
            return fail(format!("quant_min {} must be below quant_max {}", self.quant_min, self.quant_max));
        }
        if !self.policy.is_floating() {
            let span = (self.quant_max - self.quant_min) as u128;
            if span >= 1u128 << self.num_of_bits {
                return fail(format!(
                    "range [{}, {}] does not fit in {} bits",
                    self.quant_min, self.quant_max, self.num_of_bits
                ));
            }
        } else if self.exponent_bits == 0 {
            return fail("a floating config needs exponent bits".into());
        }
        if self.policy.is_per_channel() != self.channel_axis.is_some() {
            return fail("a per-channel policy needs a channel axis, a per-tensor one must not have one".into());
        }
        if let Some(block) = self.block {
            if self.policy.is_floating() || self.policy.is_power_of_2() {
                return fail("block-wise quantization is linear integer quantization".into());
            }
            if block.size == 0 || Some(block.axis) == self.channel_axis {
                return fail(format!(
                    "blocks of {} on axis {} with channels on axis {:?}: use a non-zero size on the other axis",
                    block.size, block.axis, self.channel_axis
                ));
            }
        }
        if !self.scale.is_empty() || !self.offset.is_empty() {
            if self.scale.len() != self.offset.len() {
                return fail(format!("{} scales but {} offsets", self.scale.len(), self.offset.len()));
            }
            if !self.policy.is_per_channel() && self.scale.len() != 1 {
                return fail(format!("a per-tensor config has one scale, got {}", self.scale.len()));
            }
            if self.block.is_some() {
                if let Some(s) = self.scale.iter().find(|s| !(s.is_finite() && **s != 0.0)) {
                    return fail(format!("block scale {s} is not a non-zero finite number"));
                }
            } else if let Some(s) = self.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
                return fail(format!("scale {s} is not a positive finite number"));
            }
            // A zero point is an integer of the quantized range (1e30 used to be accepted);
            // block-wise weights may have refined float zero points (HQQ; `MatMulNBits` holds
            // them in the scales' type), finite.
            if self.block.is_some() {
                if let Some(o) = self.offset.iter().find(|o| !o.is_finite()) {
                    return fail(format!("block zero point {o} is not finite"));
                }
            } else if !self.policy.is_floating()
                && let Some(o) = self.offset.iter().find(|o| {
                    !(o.is_finite()
                        && o.fract() == 0.0
                        && (self.quant_min as f64..=self.quant_max as f64).contains(&f64::from(**o)))
                })
            {
                return fail(format!(
                    "offset (zero point) {o} is not an integer in the quantized range [{}, {}]",
                    self.quant_min, self.quant_max
                ));
            }
            if self.policy.is_symmetric() && self.offset.iter().any(|o| *o != 0.0) {
                return fail("a symmetric config has zero offsets".into());
            }
        }
        Ok(())
    }
}

impl TensorQuantConfig {
    /// Whether `other` quantizes with the same scheme: policy, bits, range, rounding, float
    /// layout and channel axis — not the calibrated parameters, nor the observer. (Passes use it
    /// before calibration, to decide which configs may share parameters.)
    pub fn same_scheme(&self, other: &Self) -> bool {
        self.policy == other.policy
            && self.num_of_bits == other.num_of_bits
            && self.quant_min == other.quant_min
            && self.quant_max == other.quant_max
            && self.rounding == other.rounding
            && self.exponent_bits == other.exponent_bits
            && self.mantissa_bits == other.mantissa_bits
            && self.channel_axis == other.channel_axis
            && self.block == other.block
    }

    /// Shares no other config's parameters any more and quantizes its tensor itself: the
    /// dominance link is dropped and an `Overlapped` config becomes `Initial` (to be calibrated).
    pub fn detach(&mut self) {
        self.dominated_by = None;
        if self.state == QuantizationState::Overlapped {
            self.state = QuantizationState::Initial;
        }
    }

    /// Whether `other` maps a tensor onto the same grid: the same scheme and the same calibrated
    /// scale and offset. (Exporters use it: one Q/DQ pair serves both.)
    pub fn same_grid(&self, other: &Self) -> bool {
        self.same_scheme(other) && self.scale == other.scale && self.offset == other.offset
    }
}

/// The quantization configs of one operation, one per input and output slot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperationQuantConfig {
    pub input_configs: Vec<Option<TensorQuantConfig>>,
    pub output_configs: Vec<Option<TensorQuantConfig>>,
}

impl OperationQuantConfig {
    /// Every present config, inputs first.
    pub fn configs_mut(&mut self) -> impl Iterator<Item = &mut TensorQuantConfig> {
        self.input_configs.iter_mut().chain(self.output_configs.iter_mut()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ranges_and_validation() {
        let c = TensorQuantConfig::linear(8, true, None).unwrap();
        assert_eq!((c.quant_min, c.quant_max), (-128, 127));
        let a = TensorQuantConfig::linear(4, false, Some(0)).unwrap();
        assert_eq!((a.quant_min, a.quant_max), (0, 15));
        let wide = a.at_bits(8).unwrap();
        assert_eq!((wide.num_of_bits, wide.quant_min, wide.quant_max), (8, 0, 255));
        let signed = TensorQuantConfig::linear(4, true, Some(0)).unwrap().at_bits(8).unwrap();
        assert_eq!((signed.quant_min, signed.quant_max), (-128, 127));
        let mut narrow = TensorQuantConfig::linear(4, true, None).unwrap();
        narrow.quant_min = -7;
        assert_eq!(narrow.at_bits(8).map(|c| (c.quant_min, c.quant_max)), Some((-127, 127)));
        narrow.quant_min = -6;
        assert!(narrow.at_bits(8).is_none(), "a range of another form is the platform's to widen");
        assert!(TensorQuantConfig::linear(1, true, None).is_err());
        assert!(TensorQuantConfig::linear(17, true, None).is_err());
        assert!(TensorQuantConfig::linear(32, true, None).is_ok());

        let mut bad = c.clone();
        bad.scale = vec![0.0];
        bad.offset = vec![0.0];
        assert!(bad.validate().unwrap_err().to_string().contains("scale"));
        let mut wide = c.clone();
        wide.quant_max = 300;
        assert!(wide.validate().is_err());
        let mut ok = c;
        ok.scale = vec![0.1];
        ok.offset = vec![0.0];
        ok.validate().unwrap();
    }

    #[test]
    fn serde_round_trip() {
        let mut c = TensorQuantConfig::linear(8, false, None).unwrap();
        c.scale = vec![0.02];
        c.offset = vec![128.0];
        c.dominated_by = Some(ConfigLocation { op: OpId(3), side: ConfigSide::Output, index: 0 });
        let json = serde_json::to_string(&c).unwrap();
        let back: TensorQuantConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
    }
}
