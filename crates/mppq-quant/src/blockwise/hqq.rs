//! HQQ (Badri & Shaji, 2023, "Half-Quadratic Quantization"), data-free: each block's scale from
//! its range (`(max − min) / (2^b − 1)`, as RTN with zero points) and its zero point refined — as a
//! float — by a half-quadratic solver of an lp-norm (p = 0.7) of the weight error: the error is
//! shrunk towards its sparse part, the zero point moved to the mean that explains the rest, up to
//! 20 iterations while the mean absolute error falls (ONNX Runtime's `HQQWeightOnlyQuantizer`'s
//! parameters: β 10 growing by κ 1.01). The best zero point seen is kept. Needs zero points:
//! symmetric configs (no zero point) keep round to nearest. The float zero points are written by
//! `MatMulNBits` (zero points in the scales' type); opset 21's `DequantizeLinear` cannot hold them.

use super::{BlockScheme, BlockSolution};
use mppq_ir::quant::BlockGrid;

const ITERATIONS: usize = 20;
const LP_NORM: f32 = 0.7;
const BETA: f32 = 10.0;
const KAPPA: f32 = 1.01;

/// HQQ of every block of `runs` (`[channels][run]`, laid out by `grid`); round to nearest for a
/// symmetric scheme.
pub fn hqq(runs: &[Vec<f32>], grid: &BlockGrid, scheme: BlockScheme) -> BlockSolution {
    super::solve_blocks(runs, grid, scheme, block_params)
}

/// HQQ's scale and refined zero point of one block (RTN's for a symmetric scheme): what GPTQ
/// uses per block when the config's observer is `hqq`.
pub fn block_params(block: &[f32], scheme: BlockScheme) -> (f32, f32) {
    if scheme.symmetric {
        return super::rtn::block_params(block, scheme);
    }
    let (scale, zero) = refine(block, ((1u32 << scheme.bits) - 1) as f32);
    scheme.stored(scale, zero)
}

/// The block's scale and refined (float) zero point.
fn refine(w: &[f32], kmax: f32) -> (f32, f32) {
    let (min, max) = w.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let range = if max > min { max - min } else { kmax };
    // `inv` is 1 / scale, capped as the reference caps it.
    let inv = (kmax / range).min(2e4);
    let mut zero = (-min * inv).round();
    let error_at = |zero: f32| -> f32 {
        w.iter().map(|v| (v - ((v * inv + zero).round().clamp(0.0, kmax) - zero) / inv).abs()).sum::<f32>()
            / w.len() as f32
    };
    let (mut best, mut best_zero) = (error_at(zero), zero);
    let mut beta = BETA;
    for _ in 0..ITERATIONS {
        // One half-quadratic step: the sparse part of the error, then the zero point that fits
        // the quantized codes to the weight without it.
        let mut sum = 0f32;
        for v in w {
            let q = (v * inv + zero).round().clamp(0.0, kmax);
            let e = v - (q - zero) / inv;
            let shrunk = e.signum() * (e.abs() - e.abs().powf(LP_NORM - 1.0) / beta).max(0.0);
            sum += q - (v - shrunk) * inv;
        }
        zero = sum / w.len() as f32;
        beta *= KAPPA;
        let error = error_at(zero);
        if error < best {
            (best, best_zero) = (error, zero);
        } else {
            break;
        }
    }
    (1.0 / inv, best_zero)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::quant::QuantBlock;

    /// On a block with an outlier, HQQ's weight error (mean absolute) is below RTN's.
    #[test]
    fn refined_zero_points_lower_the_weight_error() {
        let mut seed = 3u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let runs: Vec<Vec<f32>> =
            (0..16).map(|_| (0..64).map(|i| rnd() + if i == 5 { 2.5 } else { 0.0 }).collect()).collect();
        let grid = BlockGrid::new(&[16, 64], 0, QuantBlock { axis: 1, size: 32 }).unwrap();
        let scheme = BlockScheme {
            bits: 4,
            symmetric: false,
            quant_min: 0,
            quant_max: 15,
            params_type: mppq_ir::DataType::Float,
        };
        let error = |s: &BlockSolution| {
            let dq = s.dequantized(&grid);
            dq.iter().zip(&runs).flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| f64::from((x - y).abs()))).sum::<f64>()
        };
        let (rtn, hqq) = (super::super::rtn::rtn(&runs, &grid, scheme), hqq(&runs, &grid, scheme));
        assert!(error(&hqq) < error(&rtn), "HQQ {} vs RTN {}", error(&hqq), error(&rtn));
        assert!(hqq.offset.iter().any(|o| o.fract() != 0.0), "zero points are refined as floats");
    }
}
