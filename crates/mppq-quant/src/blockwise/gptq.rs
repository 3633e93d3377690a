//! GPTQ (Frantar et al., 2022): the codes of a block-wise weight chosen one input channel at a
//! time, each channel's rounding error pushed onto the channels not yet quantized through the
//! inverse Hessian of the layer's inputs (`H = Xᵀ X` over calibration rows), so the layer's
//! *output* error is what is minimised, not the weight error. Each block's scale and zero point
//! are found (as [`super::rtn`] finds them, ORT's formulas) when the walk reaches the block, on
//! the weights as updated so far — the "static groups off" variant of the reference code.
//! Options: damping as a fraction of the mean diagonal (`0.01` in the reference), no act-order.

use super::{BlockScheme, BlockSolution};
use mppq_ir::quant::{BlockGrid, block_code, block_value};

/// The Gram matrix `Σ x xᵀ` of input rows, accumulated in f64 from Gram matrices computed
/// elsewhere (the pass uses the executor's GEMM); [`Hessian::finish`] reads its upper triangle.
#[derive(Clone, Debug)]
pub struct Hessian {
    pub k: usize,
    sum: Vec<f64>,
    pub rows: usize,
}

impl Hessian {
    pub fn new(k: usize) -> Self {
        Self { k, sum: vec![0.0; k * k], rows: 0 }
    }

    /// Adds the Gram matrix `Xᵀ X` (`k × k`, row-major) of `rows` rows computed elsewhere (a GEMM).
    pub fn add_gram(&mut self, gram: &[f32], rows: usize) {
        for (s, g) in self.sum.iter_mut().zip(gram) {
            *s += f64::from(*g);
        }
        self.rows += rows;
    }

    /// The symmetric matrix, mean over rows.
    pub fn finish(&self) -> Vec<f64> {
        let (k, n) = (self.k, self.rows.max(1) as f64);
        let mut h = vec![0.0; k * k];
        for i in 0..k {
            for j in i..k {
                let v = self.sum[i * k + j] / n;
                h[i * k + j] = v;
                h[j * k + i] = v;
            }
        }
        h
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    // Four running sums: the loop vectorises (a single f64 sum is a dependency chain).
    let mut acc = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f64>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f64>()
}

/// In-place Cholesky `A = L Lᵀ` (lower triangle written, upper cleared); `false` if `A` is not
/// positive definite.
fn cholesky(a: &mut [f64], k: usize) -> bool {
    for j in 0..k {
        let rest = &mut a[j * k..];
        let row_j = &mut rest[..k];
        let d = row_j[j] - dot(&row_j[..j], &row_j[..j]);
        if d <= 0.0 || !d.is_finite() {
            return false;
        }
        let d = d.sqrt();
        row_j[j] = d;
        row_j[j + 1..].fill(0.0);
        let row_j: Vec<f64> = row_j[..j].to_vec();
        for row_i in rest[k..].chunks_exact_mut(k) {
            row_i[j] = (row_i[j] - dot(&row_i[..j], &row_j)) / d;
        }
    }
    true
}

/// The upper Cholesky factor `U` of `H⁻¹` (`H⁻¹ = Uᵀ U`, what torch's `cholesky(…, upper=True)`
/// returns), the matrix GPTQ's updates read.
fn inverse_upper_factor(mut h: Vec<f64>, k: usize) -> Option<Vec<f64>> {
    if !cholesky(&mut h, k) {
        return None;
    }
    // L⁻¹ by forward substitution, stored transposed (row c = column c of L⁻¹) so that every
    // inner product runs over contiguous memory.
    let mut inv_lt = vec![0.0; k * k];
    for c in 0..k {
        inv_lt[c * k + c] = 1.0 / h[c * k + c];
        for i in c + 1..k {
            let s = dot(&h[i * k + c..i * k + i], &inv_lt[c * k + c..c * k + i]);
            inv_lt[c * k + i] = -s / h[i * k + i];
        }
    }
    // H⁻¹ = L⁻ᵀ L⁻¹: (H⁻¹)ᵢⱼ = Σₚ (L⁻¹)ₚᵢ (L⁻¹)ₚⱼ, rows i and j of the transposed store.
    let mut hinv = vec![0.0; k * k];
    for i in 0..k {
        for j in i..k {
            let v = dot(&inv_lt[i * k + j..(i + 1) * k], &inv_lt[j * k + j..(j + 1) * k]);
            hinv[i * k + j] = v;
            hinv[j * k + i] = v;
        }
    }
    drop((h, inv_lt));
    if !cholesky(&mut hinv, k) {
        return None;
    }
    let mut u = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            u[j * k + i] = hinv[i * k + j];
        }
    }
    Some(u)
}

/// What GPTQ reads of a layer's inputs: the damped Hessian's inverse as its upper Cholesky factor,
/// and the input channels that never carried a value (their weights are zeroed, as the reference
/// does). Layers reading the same input (a transformer's Q, K and V) share one.
#[derive(Clone, Debug)]
pub struct GptqFactor {
    k: usize,
    upper: Vec<f64>,
    dead: Vec<bool>,
}

impl GptqFactor {
    /// `None` when the damped Hessian is not positive definite (the caller keeps RTN).
    pub fn new(hessian: &Hessian, damp: f64) -> Option<Self> {
        let k = hessian.k;
        let mut h = hessian.finish();
        let mut dead = vec![false; k];
        for (i, d) in dead.iter_mut().enumerate() {
            if h[i * k + i] == 0.0 {
                *d = true;
                h[i * k + i] = 1.0;
            }
        }
        let mean_diag = (0..k).map(|i| h[i * k + i]).sum::<f64>() / k as f64;
        for i in 0..k {
            h[i * k + i] += damp * mean_diag;
        }
        Some(Self { k, upper: inverse_upper_factor(h, k)?, dead })
    }
}

/// GPTQ of every channel run of a weight (`[channels][run]`, the run along the input channels,
/// which the Hessian is over). `None` when the Hessian is not positive definite.
pub fn gptq(
    runs: &[Vec<f32>],
    grid: &BlockGrid,
    scheme: BlockScheme,
    hessian: &Hessian,
    damp: f64,
) -> Option<BlockSolution> {
    gptq_with(runs, grid, scheme, &GptqFactor::new(hessian, damp)?)
}

/// [`gptq`] with a factor already computed (`None` when it is over another number of channels).
pub fn gptq_with(
    runs: &[Vec<f32>],
    grid: &BlockGrid,
    scheme: BlockScheme,
    factor: &GptqFactor,
) -> Option<BlockSolution> {
    gptq_blocks(runs, grid, scheme, factor, super::rtn::block_params)
}

/// [`gptq_with`] with each block's scale and zero point found by `params` (RTN's, or HQQ's
/// refined float zero point) on the weights as updated so far.
pub fn gptq_blocks(
    runs: &[Vec<f32>],
    grid: &BlockGrid,
    scheme: BlockScheme,
    factor: &GptqFactor,
    params: super::BlockParams,
) -> Option<BlockSolution> {
    let k = grid.run;
    if factor.k != k {
        return None;
    }
    let (u, dead) = (&factor.upper, &factor.dead);
    let mut solution = BlockSolution {
        scale: vec![0.0; grid.params()],
        offset: vec![0.0; grid.params()],
        codes: Vec::with_capacity(runs.len()),
    };
    for (c, run) in runs.iter().enumerate() {
        let mut w: Vec<f64> = run.iter().zip(dead).map(|(v, d)| if *d { 0.0 } else { f64::from(*v) }).collect();
        let mut codes = vec![0i32; k];
        let (mut scale, mut offset) = (1.0f32, 0.0f32);
        for i in 0..k {
            if i % grid.size == 0 {
                let end = (i + grid.size).min(k);
                let block: Vec<f32> = w[i..end].iter().map(|v| *v as f32).collect();
                (scale, offset) = params(&block, scheme);
                let p = grid.param(c, i);
                solution.scale[p] = scale;
                solution.offset[p] = offset;
            }
            let q = block_code(w[i] as f32, scale, offset, scheme.quant_min, scheme.quant_max);
            codes[i] = q;
            let err = (w[i] - f64::from(block_value(q, scale, offset))) / u[i * k + i];
            for (wj, uj) in w[i + 1..].iter_mut().zip(&u[i * k + i + 1..(i + 1) * k]) {
                *wj -= err * uj;
            }
        }
        solution.codes.push(codes);
    }
    Some(solution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::quant::QuantBlock;

    /// On correlated inputs GPTQ's output error is below RTN's (same scheme, same blocks).
    #[test]
    fn lowers_the_output_error_of_rtn_on_correlated_inputs() {
        let (k, n, rows) = (64, 8, 512);
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let mut x = vec![0f32; rows * k];
        for r in 0..rows {
            let common = rnd();
            for i in 0..k {
                x[r * k + i] = common * 2.0 + rnd() * (1.0 + i as f32 / k as f32);
            }
        }
        let runs: Vec<Vec<f32>> = (0..n).map(|_| (0..k).map(|_| rnd()).collect()).collect();
        let grid = BlockGrid::new(&[n, k], 0, QuantBlock { axis: 1, size: 32 }).unwrap();
        let scheme = BlockScheme {
            bits: 4,
            symmetric: true,
            quant_min: -8,
            quant_max: 7,
            params_type: mppq_ir::DataType::Float,
        };
        let mut gram = vec![0f32; k * k];
        for row in x.chunks_exact(k) {
            for (i, xi) in row.iter().enumerate() {
                for (j, xj) in row.iter().enumerate() {
                    gram[i * k + j] += xi * xj;
                }
            }
        }
        let mut h = Hessian::new(k);
        h.add_gram(&gram, rows);
        let out_err = |s: &BlockSolution| {
            let dq = s.dequantized(&grid);
            let mut e = 0f64;
            for r in 0..rows {
                for c in 0..n {
                    let d: f32 = (0..k).map(|i| x[r * k + i] * (dq[c][i] - runs[c][i])).sum();
                    e += f64::from(d * d);
                }
            }
            e
        };
        let rtn = super::super::rtn::rtn(&runs, &grid, scheme);
        let g = gptq(&runs, &grid, scheme, &h, 0.01).unwrap();
        let (e_rtn, e_gptq) = (out_err(&rtn), out_err(&g));
        assert!(e_gptq < 0.8 * e_rtn, "GPTQ {e_gptq} vs RTN {e_rtn}");
    }
}
