//! Block-wise weight quantization (weight-only INT4/INT8 for transformers and LLMs): the
//! algorithms that choose each block's scale, zero point and codes ([`mppq_ir::quant::block`]
//! for the layout). They work on channel runs (`[channels][run]`, [`BlockGrid::runs`]) and
//! return a [`BlockSolution`] whose parameters go into the config. The simulation and the
//! exporters find the codes again from the weight and the parameters with MLAS's rounding
//! ([`mppq_ir::quant::block_code`]); an algorithm that picks other codes than that rounding of
//! the float weight (GPTQ) writes its dequantized values into the weight.

pub mod gptq;
pub mod hqq;
pub mod rtn;

use crate::error::{QuantError, Result};
use mppq_ir::DataType;
use mppq_ir::quant::{BlockGrid, ObserverKind, QuantizationState, TensorQuantConfig, block_code, block_value};

/// The integer scheme of a block config: codes `q` in `[quant_min, quant_max]` (signed and
/// symmetric, or unsigned with a zero point), dequantized as `(q − offset) · scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockScheme {
    pub bits: u32,
    pub symmetric: bool,
    pub quant_min: i64,
    pub quant_max: i64,
    /// The float type the parameters are stored in (the weight's: `MatMulNBits` and
    /// `DequantizeLinear` take the scales in the model's float type); every algorithm rounds its
    /// scales and zero points to it, so what is simulated is what a float16 model stores.
    pub params_type: DataType,
}

impl BlockScheme {
    /// The scheme of a block-wise config; the two ranges ONNX Runtime's `MatMulNBits` stores
    /// (`[−2^(b−1), 2^(b−1) − 1]` symmetric, `[0, 2^b − 1]` with zero points) are the ones allowed.
    pub fn of(config: &TensorQuantConfig, variable: &str) -> Result<Self> {
        let bits = config.num_of_bits;
        let half = 1i64 << (bits.clamp(2, 16) - 1);
        let symmetric = config.policy.is_symmetric();
        let expected = if symmetric { (-half, half - 1) } else { (0, 2 * half - 1) };
        if config.block.is_none() || !(2..=8).contains(&bits) || (config.quant_min, config.quant_max) != expected {
            return Err(QuantError::ConfigMismatch {
                variable: variable.into(),
                observer: "block-wise quantization",
                message: format!(
                    "a block-wise config of 2–8 bits with the range {expected:?} is expected, got {} bits [{}, {}]",
                    bits, config.quant_min, config.quant_max
                ),
            });
        }
        Ok(Self {
            bits,
            symmetric,
            quant_min: config.quant_min,
            quant_max: config.quant_max,
            params_type: DataType::Float,
        })
    }

    /// The same scheme with parameters stored in `dtype` (float16/bfloat16 weights).
    pub fn stored_as(self, dtype: DataType) -> Self {
        Self {
            params_type: if matches!(dtype, DataType::Float16 | DataType::BFloat16) { dtype } else { DataType::Float },
            ..self
        }
    }

    /// `(scale, offset)` as the parameters' type holds them: rounded to float16/bfloat16 (a
    /// scale never to 0), unchanged for float32. Integer zero points are exact in every type.
    pub fn stored(&self, scale: f32, offset: f32) -> (f32, f32) {
        let round = |v: f32| match self.params_type {
            DataType::Float16 => half::f16::from_f32(v).to_f32(),
            DataType::BFloat16 => half::bf16::from_f32(v).to_f32(),
            _ => v,
        };
        let smallest = match self.params_type {
            DataType::Float16 => half::f16::MIN_POSITIVE.to_f32(),
            DataType::BFloat16 => half::bf16::MIN_POSITIVE.to_f32(),
            _ => f32::MIN_POSITIVE,
        };
        let s = round(scale);
        (if s == 0.0 { smallest.copysign(scale) } else { s }, round(offset))
    }
}

/// Every block of `runs` (`[channels][run]`) with the scale and offset `params` finds for it, each
/// element at its code ([`mppq_ir::quant::block_code`]): the data-free algorithms (RTN, HQQ).
pub fn solve_blocks(runs: &[Vec<f32>], grid: &BlockGrid, scheme: BlockScheme, params: BlockParams) -> BlockSolution {
    let mut solution = BlockSolution {
        scale: Vec::with_capacity(grid.params()),
        offset: Vec::with_capacity(grid.params()),
        codes: Vec::with_capacity(runs.len()),
    };
    for run in runs {
        let mut codes = Vec::with_capacity(run.len());
        for block in run.chunks(grid.size) {
            let (scale, offset) = params(block, scheme);
            codes.extend(block.iter().map(|v| block_code(*v, scale, offset, scheme.quant_min, scheme.quant_max)));
            solution.scale.push(scale);
            solution.offset.push(offset);
        }
        solution.codes.push(codes);
    }
    solution
}

/// How one block's `(scale, offset)` is found from its values ([`rtn::block_params`],
/// [`hqq::block_params`]); GPTQ calls it on each block as its walk reaches it.
pub type BlockParams = fn(&[f32], BlockScheme) -> (f32, f32);

/// Every block's scale and offset (channel-major, `c · blocks + b`) and every element's code,
/// per channel run.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockSolution {
    pub scale: Vec<f32>,
    pub offset: Vec<f32>,
    pub codes: Vec<Vec<i32>>,
}

impl BlockSolution {
    /// The dequantized channel runs: `(q − offset) · scale` in f32, what the runtime computes with.
    pub fn dequantized(&self, grid: &BlockGrid) -> Vec<Vec<f32>> {
        self.codes
            .iter()
            .enumerate()
            .map(|(c, run)| {
                run.iter()
                    .enumerate()
                    .map(|(k, q)| {
                        let p = grid.param(c, k);
                        block_value(*q, self.scale[p], self.offset[p])
                    })
                    .collect()
            })
            .collect()
    }
}

/// Calibrates a block-wise weight config from the weight's values, data-free, by its observer:
/// `minmax` is [`rtn::rtn`] (ONNX Runtime's round to nearest), `hqq` is [`hqq::hqq`]. The
/// data-aware algorithms (GPTQ) are passes that run after it.
pub fn calibrate(config: &mut TensorQuantConfig, variable: &str, weight: &mppq_ir::TensorData) -> Result<()> {
    let scheme = BlockScheme::of(config, variable)?.stored_as(weight.dtype());
    let (values, shape) = (&weight.to_f32_vec()?, weight.shape());
    let grid = config.block_grid(shape)?.ok_or_else(|| QuantError::ConfigMismatch {
        variable: variable.into(),
        observer: "block-wise quantization",
        message: "the config has no block".into(),
    })?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(QuantError::NonFinite { variable: variable.into(), index: i, value: values[i] });
    }
    let solution = match config.observer {
        ObserverKind::Minmax => rtn::rtn(&grid.runs(values), &grid, scheme),
        ObserverKind::Hqq => hqq::hqq(&grid.runs(values), &grid, scheme),
        other => {
            return Err(QuantError::ConfigMismatch {
                variable: variable.into(),
                observer: "block-wise quantization",
                message: format!(
                    "observer `{other}`: block-wise weights are calibrated by `minmax` (round to nearest) or `hqq`"
                ),
            });
        }
    };
    config.scale = solution.scale;
    config.offset = solution.offset;
    config.state = QuantizationState::Activated;
    config.validate()?;
    Ok(())
}
