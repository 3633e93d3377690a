//! `awq`: activation-aware weight quantization (Lin et al., 2023) of block-wise weights. The
//! input channels on which an activation carries large values matter most to the product, so the
//! weights that read the activation are scaled up on those channels (and the activation down by
//! the same factor: folded into its LayerNormalization or constant-Mul producer, else a Mul
//! inserted; SmoothQuant's transform), which block quantization then keeps more precisely. Per
//! activation the factor is `s_k = mean|x_k|^α`, normalised by `√(max · min)`, with α searched over
//! 0, 0.1, …, 1 by the readers' output error on sampled calibration rows, each weight quantized as
//! its config says (RTN or HQQ per block); α 0 (nothing) wins unless another lowers the error.
//! Guarded: recalibrated, measured and undone unless the output SNR rises. By name only
//! (`[pipeline.awq] enabled = true`).

use crate::error::Result;
use crate::optimisation::smooth_quant::{Target, apply, find_targets_where, sample_rows};
use crate::runtime::guard::Guard;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::{BlockGrid, ObserverKind, TensorQuantConfig};
use mppq_quant::blockwise::{BlockParams, BlockScheme, hqq, rtn, solve_blocks};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The knobs of `awq` (settings section `awq`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AwqSetting {
    /// On or off; absent: off (by name only: on all-MiniLM-L6-v2 at g32 it lowered the held-out
    /// SNR after GPTQ from 15.26 to 15.11 dB and took 60 s; `docs/weight-only.md`).
    pub enabled: Option<bool>,
    /// α candidates: 0, 1/grid, …, 1.
    pub grid: usize,
}

impl Default for AwqSetting {
    fn default() -> Self {
        Self { enabled: None, grid: 10 }
    }
}

#[derive(Default)]
pub struct Awq {
    pub setting: AwqSetting,
}

/// The block-wise weight config of an operation, if it has one.
fn block_config(op: &mppq_ir::Operation) -> Option<&TensorQuantConfig> {
    op.quant_config.as_ref()?.input_configs.iter().flatten().find(|c| c.block.is_some())
}

/// One reader as the search needs it: float weight runs `[out][in]`, its grid and scheme.
struct Reader {
    runs: Vec<Vec<f32>>,
    grid: BlockGrid,
    scheme: BlockScheme,
    params: BlockParams,
}

impl Reader {
    fn new(graph: &mppq_ir::Graph, target: &Target, i: usize) -> Option<Self> {
        let (op, weight, _) = &target.readers[i];
        let config = block_config(graph.operation(*op).ok()?)?;
        let grid = config.block_grid(&weight.shape).ok()??;
        let scheme = BlockScheme::of(config, &weight.name).ok()?;
        let params: BlockParams =
            if config.observer == ObserverKind::Hqq { hqq::block_params } else { rtn::block_params };
        Some(Self { runs: grid.runs(&weight.values), grid, scheme, params })
    }

    /// The float product of `rows` (each `k` values) with the weight: `[rows][out]`.
    fn float_outputs(&self, rows: &[f32], k: usize) -> Vec<f32> {
        rows.chunks_exact(k).flat_map(|x| self.runs.iter().map(move |w| dot(x, w))).collect()
    }

    /// Squared error against `float` ([`Self::float_outputs`]) when the weight is scaled by `s`
    /// per input channel, block-quantized, and reads the activation divided by `s`.
    fn error(&self, rows: &[f32], k: usize, float: &[f32], s: &[f32]) -> f64 {
        let scaled: Vec<Vec<f32>> = self.runs.iter().map(|r| r.iter().zip(s).map(|(w, s)| w * s).collect()).collect();
        let dq = solve_blocks(&scaled, &self.grid, self.scheme, self.params).dequantized(&self.grid);
        let mut error = 0f64;
        for (x, y) in rows.chunks_exact(k).zip(float.chunks_exact(dq.len())) {
            let xs: Vec<f32> = x.iter().zip(s).map(|(v, s)| v / s).collect();
            for (q, y) in dq.iter().zip(y) {
                let d = y - dot(&xs, q);
                error += f64::from(d * d);
            }
        }
        error
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `mean|x_k|^α`, normalised by `√(max · min)` of the factors, at least 1e-4.
fn factors(mean_abs: &[f32], alpha: f32) -> Vec<f32> {
    let s: Vec<f32> = mean_abs.iter().map(|m| m.max(1e-8).powf(alpha)).collect();
    let (lo, hi) = s.iter().fold((f32::MAX, 0f32), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let norm = (lo * hi).sqrt().max(1e-12);
    s.iter().map(|v| (v / norm).max(1e-4)).collect()
}

impl Pass for Awq {
    fn name(&self) -> &'static str {
        "awq"
    }

    fn guard(&self) -> Guard {
        Guard::Recalibrate
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let targets = find_targets_where(ctx.graph, |op| block_config(op).is_some());
        if targets.is_empty() {
            return Ok(PassReport::new(self.name(), 0, "no block-wise weights"));
        }
        let grid = self.setting.grid.max(1);
        let mut scaled = Vec::new();
        for target in &targets {
            let Some(k) = target.readers.first().map(|(_, _, c)| c.count()) else { continue };
            let readers: Vec<Reader> =
                (0..target.readers.len()).filter_map(|i| Reader::new(ctx.graph, target, i)).collect();
            if readers.len() != target.readers.len() || readers.iter().any(|r| r.grid.run != k) {
                continue;
            }
            let rows = sample_rows(ctx, target.activation, k)?;
            let n = rows.len() / k.max(1);
            if n == 0 {
                continue;
            }
            let mut mean_abs = vec![0f32; k];
            for x in rows.chunks_exact(k) {
                mean_abs.iter_mut().zip(x).for_each(|(m, v)| *m += v.abs() / n as f32);
            }
            let float: Vec<Vec<f32>> = readers.iter().map(|r| r.float_outputs(&rows, k)).collect();
            let errors: Vec<(f32, f64)> = (0..=grid)
                .into_par_iter()
                .map(|step| {
                    let alpha = step as f32 / grid as f32;
                    let s = if step == 0 { vec![1.0; k] } else { factors(&mean_abs, alpha) };
                    (alpha, readers.iter().zip(&float).map(|(r, y)| r.error(&rows, k, y, &s)).sum())
                })
                .collect();
            let (alpha, best) = errors.iter().copied().fold((0.0, f64::INFINITY), |b, e| if e.1 < b.1 { e } else { b });
            if alpha > 0.0 && best < errors[0].1 {
                apply(ctx.graph, target, &factors(&mean_abs, alpha))?;
                scaled.push(format!("{} α {alpha}", ctx.graph.var_name(target.activation)));
            }
        }
        let summary = format!(
            "{} of {} activations scaled{}",
            scaled.len(),
            targets.len(),
            if scaled.is_empty() { String::new() } else { format!(" ({})", scaled.join(", ")) }
        );
        Ok(PassReport::new(self.name(), scaled.len(), summary))
    }
}
