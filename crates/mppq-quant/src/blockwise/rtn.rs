//! Round to nearest, exactly as ONNX Runtime's block quantizer (MLAS `MlasQuantizeBlockwise`,
//! what `matmul_nbits_quantizer`'s default algorithm calls) computes it, so that our RTN equals
//! ORT's to the step:
//! - symmetric: the block's value of largest magnitude `m` (the maximum on a tie) maps onto the
//!   lowest code: `scale = m / −2^(b−1)` (negative when `m` is positive);
//! - asymmetric: the range widened to hold 0, `scale = (max − min) / (2^b − 1)`, zero point
//!   `roundf(−min / scale)` clamped to the codes;
//! - codes as [`block_code`] finds them (MLAS's rounding), symmetric zero point `2^(b−1)`.
//!
//! A block of zeros gets scale 0 in ORT (all codes at the zero point); here it gets scale 1 with
//! the same codes, so the dequantized values (all 0) are the same and the config stays valid.

use super::{BlockScheme, BlockSolution};
use mppq_ir::quant::BlockGrid;

/// ORT's RTN of every block of `runs` (`[channels][run]`, laid out by `grid`).
pub fn rtn(runs: &[Vec<f32>], grid: &BlockGrid, scheme: BlockScheme) -> BlockSolution {
    super::solve_blocks(runs, grid, scheme, block_params)
}

/// ORT's scale and zero point (offset) of one block (scale 1 for a block of zeros).
pub fn block_params(block: &[f32], scheme: BlockScheme) -> (f32, f32) {
    let kmax = ((1u32 << scheme.bits) - 1) as f32;
    let mid = (1u32 << (scheme.bits - 1)) as f32;
    let (min, max) = block.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let (scale, offset) = if scheme.symmetric {
        let m = if max.abs() > min.abs() { max } else { min };
        (m / -mid, 0.0)
    } else {
        let (lo, hi) = (min.min(0.0), max.max(0.0));
        let scale = (hi - lo) / kmax;
        let zp = if scale != 0.0 { -lo / scale } else { lo };
        (scale, zp.clamp(0.0, kmax).round())
    };
    scheme.stored(if scale != 0.0 { scale } else { 1.0 }, offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::quant::QuantBlock;

    fn scheme(symmetric: bool) -> BlockScheme {
        let (quant_min, quant_max) = if symmetric { (-8, 7) } else { (0, 15) };
        BlockScheme { bits: 4, symmetric, quant_min, quant_max, params_type: mppq_ir::DataType::Float }
    }

    /// Figures from ONNX Runtime 1.31's `quantize_matmul_4bits` on the same block.
    #[test]
    fn symmetric_maps_the_largest_magnitude_onto_minus_eight() {
        let grid = BlockGrid::new(&[4, 1], 1, QuantBlock { axis: 0, size: 4 }).unwrap();
        let runs = vec![vec![0.5f32, -1.6, 2.4, 0.0]];
        let s = rtn(&runs, &grid, scheme(true));
        assert_eq!(s.scale, vec![2.4 / -8.0]);
        // 0.5 / -0.3 = -1.67 → -2; -1.6 → 5.33 → 5; 2.4 → -8; 0 → 0.
        assert_eq!(s.codes[0], vec![-2, 5, -8, 0]);
        let dq = s.dequantized(&grid);
        assert!((dq[0][2] - 2.4).abs() < 1e-6);
    }

    #[test]
    fn asymmetric_holds_zero_and_rounds_the_zero_point() {
        let grid = BlockGrid::new(&[1, 3], 0, QuantBlock { axis: 1, size: 16 }).unwrap();
        let s = rtn(&[vec![0.2f32, 1.0, 3.0]], &grid, scheme(false));
        assert_eq!(s.scale, vec![3.0 / 15.0]);
        assert_eq!(s.offset, vec![0.0]);
        assert_eq!(s.codes[0], vec![1, 5, 15]);
        let zeros = rtn(&[vec![0.0f32; 3]], &grid, scheme(false));
        assert_eq!((zeros.scale[0], zeros.dequantized(&grid)[0].clone()), (1.0, vec![0.0; 3]));
    }
}
