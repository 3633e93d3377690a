//! Block-wise (group-wise) quantization of a 2-D weight: each output channel's input-channel
//! run is cut into blocks of `size` elements (the last one shorter when the run is not a multiple
//! of `size`), and every block has its own scale and zero point. This is the layout of weight-only
//! INT4/INT8 for transformers and LLMs (ONNX Runtime's `MatMulNBits`, opset 21's blocked
//! `DequantizeLinear`, NNCF's group-wise compression).
//!
//! Parameters are stored channel-major: block `b` of channel `c` is at `c · blocks + b` — the
//! order of `MatMulNBits`' `scales [N, k_blocks]`.
//!
//! A block's codes are computed as ONNX Runtime's block quantizer (MLAS) computes them
//! ([`block_code`]), not with the division and the rounding policy of other configs: block-wise
//! weights exist for ORT's `MatMulNBits` and blocked `DequantizeLinear`, and the simulation, the
//! algorithms and the exporters must all find ORT's codes.

use crate::error::{IrError, Result};
use serde::{Deserialize, Serialize};

/// Where the blocks lie: along `axis` (the weight's input-channel axis), `size` elements each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QuantBlock {
    pub axis: usize,
    pub size: usize,
}

/// A [`QuantBlock`] applied to one tensor shape: which parameter each element uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockGrid {
    /// Output channels (the config's channel axis) and the length of each channel's run.
    pub channels: usize,
    pub run: usize,
    pub size: usize,
    /// Blocks per channel: `ceil(run / size)`.
    pub blocks: usize,
    /// Whether the channel axis is the tensor's first (`[N, K]`, a transposed Gemm weight) or its
    /// second (`[K, N]`, a MatMul weight).
    channel_major: bool,
}

impl BlockGrid {
    /// The grid of a 2-D tensor of `shape` with output channels on `channel_axis` and blocks on
    /// the other axis.
    pub fn new(shape: &[usize], channel_axis: usize, block: QuantBlock) -> Result<Self> {
        let fail = |m: String| Err(IrError::InvalidQuantConfig(m));
        if shape.len() != 2 {
            return fail(format!("block-wise quantization needs a 2-D weight, got shape {shape:?}"));
        }
        if channel_axis > 1 || block.axis > 1 || channel_axis == block.axis {
            return fail(format!(
                "blocks on axis {} and channels on axis {channel_axis} must be the two axes of a 2-D weight",
                block.axis
            ));
        }
        if block.size == 0 {
            return fail("block size 0".into());
        }
        let (channels, run) = (shape[channel_axis], shape[block.axis]);
        Ok(Self { channels, run, size: block.size, blocks: run.div_ceil(block.size), channel_major: channel_axis == 0 })
    }

    /// How many scales (and zero points) the tensor has.
    pub fn params(&self) -> usize {
        self.channels * self.blocks
    }

    /// The flat (row-major) index of element `k` of channel `c`'s run.
    pub fn index(&self, c: usize, k: usize) -> usize {
        if self.channel_major { c * self.run + k } else { k * self.channels + c }
    }

    /// The parameter of element `k` of channel `c`.
    pub fn param(&self, c: usize, k: usize) -> usize {
        c * self.blocks + k / self.size
    }

    /// The tensor as channel runs (`[channels][run]`, what the block algorithms work on).
    pub fn runs(&self, values: &[f32]) -> Vec<Vec<f32>> {
        (0..self.channels).map(|c| (0..self.run).map(|k| values[self.index(c, k)]).collect()).collect()
    }

    /// Writes channel runs back into the tensor's layout.
    pub fn write_runs(&self, runs: &[Vec<f32>], values: &mut [f32]) {
        for (c, run) in runs.iter().enumerate() {
            for (k, v) in run.iter().enumerate() {
                values[self.index(c, k)] = *v;
            }
        }
    }

    /// Checks that `params` parameters fit this grid.
    pub fn check_params(&self, params: usize, shape: &[usize]) -> Result<()> {
        if params == self.params() {
            return Ok(());
        }
        Err(IrError::InvalidQuantConfig(format!(
            "{params} block parameters for shape {shape:?}: {} channels × {} blocks of {} expected",
            self.channels, self.blocks, self.size
        )))
    }
}

/// The code of `v` in a block with `scale` and `offset` (zero point) whose codes lie in
/// `[quant_min, quant_max]`, as MLAS computes it: the unsigned code
/// `clamp(roundf(v · (1 / scale) + (offset − quant_min)), 0, quant_max − quant_min)` in f32
/// (reciprocal rounded to f32 first, half away from zero), shifted back by `quant_min`. The
/// value it stands for is `(code − offset) · scale`.
pub fn block_code(v: f32, scale: f32, offset: f32, quant_min: i64, quant_max: i64) -> i32 {
    let reciprocal = if scale != 0.0 { 1.0 / scale } else { 0.0 };
    let zero_point = offset - quant_min as f32;
    let unsigned = (v * reciprocal + zero_point).round().clamp(0.0, (quant_max - quant_min) as f32);
    // NaN stays NaN in the dequantized value (the float-to-int cast would make it 0).
    if unsigned.is_nan() { i32::MIN } else { unsigned as i32 + quant_min as i32 }
}

/// `(code − offset) · scale` in f32; NaN for the NaN marker [`block_code`] returns.
pub fn block_value(code: i32, scale: f32, offset: f32) -> f32 {
    if code == i32::MIN { f32::NAN } else { (code as f32 - offset) * scale }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_half_away_after_the_zero_point_as_mlas_does() {
        // 0.5 · (1/1) + 8 = 8.5 → 9 (not ties-to-even 8): code 1.
        assert_eq!(block_code(0.5, 1.0, 0.0, -8, 7), 1);
        assert_eq!(block_code(-0.5, 1.0, 0.0, -8, 7), 0);
        assert_eq!(block_code(100.0, 1.0, 0.0, -8, 7), 7);
        assert_eq!(block_code(-2.0, 0.5, 3.0, 0, 15), 0);
        assert_eq!(block_value(block_code(0.3, 0.25, 3.0, 0, 15), 0.25, 3.0), 0.25);
        assert!(block_value(block_code(f32::NAN, 1.0, 0.0, -8, 7), 1.0, 0.0).is_nan());
    }

    #[test]
    fn both_layouts_index_the_same_channel_runs() {
        // [K=5, N=2], channels on axis 1: element (k, c) at k*2 + c.
        let g = BlockGrid::new(&[5, 2], 1, QuantBlock { axis: 0, size: 2 }).unwrap();
        assert_eq!((g.channels, g.run, g.blocks, g.params()), (2, 5, 3, 6));
        let values: Vec<f32> = (0..10).map(|v| v as f32).collect();
        let runs = g.runs(&values);
        assert_eq!(runs[1], vec![1.0, 3.0, 5.0, 7.0, 9.0]);
        assert_eq!(g.param(1, 4), 5);
        let mut back = vec![0.0; 10];
        g.write_runs(&runs, &mut back);
        assert_eq!(back, values);
        // [N=2, K=5], channels on axis 0.
        let t = BlockGrid::new(&[2, 5], 0, QuantBlock { axis: 1, size: 2 }).unwrap();
        assert_eq!(t.runs(&values)[1], vec![5.0, 6.0, 7.0, 8.0, 9.0]);
    }

    #[test]
    fn other_shapes_are_typed_errors() {
        assert!(BlockGrid::new(&[2, 3, 4], 1, QuantBlock { axis: 0, size: 2 }).is_err());
        assert!(BlockGrid::new(&[2, 3], 0, QuantBlock { axis: 0, size: 2 }).is_err());
        assert!(BlockGrid::new(&[2, 3], 0, QuantBlock { axis: 1, size: 0 }).is_err());
    }
}
