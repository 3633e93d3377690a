//! `gptq`: the codes of every block-wise weight chosen by GPTQ ([`mppq_quant::blockwise::gptq`])
//! from the Hessian of the layer's inputs on calibration data, instead of round-to-nearest.
//! The inputs are the float model's (one run over the batches for every layer at once, not the
//! layer-by-layer run of the reference code, which would see earlier layers' errors). Each
//! weight is written as its dequantized codes, so the simulation and the exports find exactly
//! GPTQ's codes. Padded tokens are left out of the Hessians. Guarded: kept only where it raises
//! the output SNR.

use crate::error::{InPass, Result};
use crate::runtime::guard::Guard;
use crate::runtime::params::{ParamView, op_params, write_param};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_exec::Tensor;
use mppq_ir::quant::{ConfigSide, QuantizationState};
use mppq_ir::{DataType, OpId, VarId};
use mppq_quant::blockwise::BlockScheme;
use mppq_quant::blockwise::gptq::{GptqFactor, Hessian, gptq_blocks};
use mppq_quant::padding::TokenPadding;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The knobs of `gptq` (settings section `gptq`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GptqSetting {
    /// On or off; absent: on from `optimize` level 1 (it only touches block-wise weights).
    pub enabled: Option<bool>,
    /// Damping added to the Hessian's diagonal, as a fraction of its mean (the reference's 0.01).
    pub damp: f64,
    /// Calibration batches read for the Hessians (at most).
    pub batches: usize,
    /// Input rows per layer (at most; a transformer's rows are its tokens).
    pub max_rows: usize,
}

impl Default for GptqSetting {
    fn default() -> Self {
        Self { enabled: None, damp: 0.01, batches: 32, max_rows: 4096 }
    }
}

#[derive(Default)]
pub struct Gptq {
    pub setting: GptqSetting,
}

/// A weight to solve: the operation, its weight slot, the input it multiplies (slot 0) and the
/// input-channel count of its blocks.
struct Target {
    op: OpId,
    slot: usize,
    input: VarId,
    k: usize,
}

fn targets(graph: &mppq_ir::Graph) -> Vec<Target> {
    let mut out = Vec::new();
    for (op, o) in graph.operations() {
        let Some(qc) = o.quant_config.as_ref() else { continue };
        let Some((slot, config)) = qc.input_configs.iter().enumerate().find_map(|(slot, c)| {
            c.as_ref().filter(|c| c.block.is_some() && c.state == QuantizationState::Activated).map(|c| (slot, c))
        }) else {
            continue;
        };
        let (Some(Some(input)), Some(Some(weight))) = (o.inputs().first().copied(), o.inputs().get(slot).copied())
        else {
            continue;
        };
        let shape = graph.variable(weight).ok().and_then(|v| v.value.as_ref()).map(|t| t.shape().to_vec());
        let Some(k) = shape.and_then(|s| config.block_grid(&s).ok().flatten()).map(|g| g.run) else { continue };
        // A weight read elsewhere too cannot be rewritten for this reader alone.
        if slot != 0 && graph.consumers(weight).len() == 1 && !graph.variable(input).is_ok_and(|v| v.is_parameter()) {
            out.push(Target { op, slot, input, k });
        }
    }
    out
}

/// One solved weight: its new values and block parameters.
struct Solved {
    weight: ParamView,
    slot: usize,
    op: OpId,
    scale: Vec<f32>,
    offset: Vec<f32>,
}

impl Pass for Gptq {
    fn name(&self) -> &'static str {
        "gptq"
    }

    fn guard(&self) -> Guard {
        Guard::Measure
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let targets = targets(ctx.graph);
        if targets.is_empty() {
            return Ok(PassReport::new(self.name(), 0, "no block-wise weights".to_string()));
        }
        let hessians = self.hessians(ctx, &targets)?;
        // One factor per input (Q, K and V read the same one), layers solved in parallel.
        let damp = self.setting.damp;
        let factors: HashMap<VarId, GptqFactor> = hessians
            .into_par_iter()
            .filter(|(_, h)| h.rows > 0)
            .filter_map(|(var, h)| Some((var, GptqFactor::new(&h, damp)?)))
            .collect();
        let mut work = Vec::new();
        for t in &targets {
            let Some(weight) = op_params(ctx.graph, t.op)?.weight else { continue };
            let op = ctx.graph.operation(t.op).in_pass(self.name())?;
            let Some(config) = op.quant_config.as_ref().and_then(|c| c.input_configs[t.slot].clone()) else { continue };
            let dtype = ctx
                .graph
                .variable(weight.var)
                .ok()
                .and_then(|v| v.value.as_ref())
                .map_or(DataType::Float, |t| t.dtype());
            let scheme = BlockScheme::of(&config, &weight.name).in_pass(self.name())?.stored_as(dtype);
            let Some(grid) = config.block_grid(&weight.shape).in_pass(self.name())? else { continue };
            let params: mppq_quant::blockwise::BlockParams = match config.observer {
                mppq_ir::quant::ObserverKind::Hqq => mppq_quant::blockwise::hqq::block_params,
                _ => mppq_quant::blockwise::rtn::block_params,
            };
            work.push((t, weight, scheme, grid, params));
        }
        let solved: Vec<Solved> = work
            .into_par_iter()
            .filter_map(|(t, mut weight, scheme, grid, params)| {
                let solution = gptq_blocks(&grid.runs(&weight.values), &grid, scheme, factors.get(&t.input)?, params)?;
                grid.write_runs(&solution.dequantized(&grid), &mut weight.values);
                Some(Solved { weight, slot: t.slot, op: t.op, scale: solution.scale, offset: solution.offset })
            })
            .collect();
        let kept_rtn = targets.len() - solved.len();
        for s in &solved {
            write_param(ctx.graph, &s.weight)?;
            let loc = mppq_ir::quant::ConfigLocation { op: s.op, side: ConfigSide::Input, index: s.slot };
            if let Some(c) = mppq_ir::quant::config_at_mut(ctx.graph, loc) {
                c.scale.clone_from(&s.scale);
                c.offset.clone_from(&s.offset);
            }
        }
        Ok(PassReport::new(
            self.name(),
            solved.len(),
            format!(
                "{} block-wise weights solved by GPTQ ({} inputs), {kept_rtn} kept at round-to-nearest (no input rows or no Hessian factor)",
                solved.len(),
                factors.len()
            ),
        ))
    }
}

impl Gptq {
    /// The Hessian of every target's input (once per input variable), from a float run over the
    /// calibration batches that stops once every one holds `max_rows` rows.
    fn hessians(&self, ctx: &mut PassContext<'_>, targets: &[Target]) -> Result<HashMap<VarId, Hessian>> {
        struct Collect {
            /// (reader, slot 0) → index of its input's Hessian.
            at: HashMap<OpId, usize>,
            hessians: Vec<(VarId, Hessian)>,
            max_rows: usize,
            /// This batch's real tokens, when its attention mask pads some.
            real: Option<Vec<bool>>,
        }
        impl mppq_exec::hooks::TensorTap for Collect {
            fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &mppq_exec::Value) {
                let Some(&i) = self.at.get(&op).filter(|_| side == ConfigSide::Input && slot == 0) else { return };
                let (_, h) = &mut self.hessians[i];
                let (k, room) = (h.k, self.max_rows.saturating_sub(h.rows));
                let Some(t) = value.as_tensor().filter(|t| t.shape().last() == Some(&k) && room > 0) else { return };
                let rows = t.numel() / k.max(1);
                // Padded tokens (an attention mask's zeros) are inputs the model never uses:
                // left out of the Hessian, as they are of every SNR.
                let real: Option<&[bool]> = self.real.as_deref().filter(|r| r.len() == rows);
                let mut values = t.to_f32_vec();
                if let Some(real) = real {
                    let mut kept = 0;
                    for (r, keep) in real.iter().enumerate() {
                        if *keep {
                            values.copy_within(r * k..(r + 1) * k, kept * k);
                            kept += 1;
                        }
                    }
                    values.truncate(kept * k);
                }
                // The first rows up to the room left; Xᵀ X by the executor's GEMM.
                let take = (values.len() / k).min(room);
                if take == 0 {
                    return;
                }
                values.truncate(take * k);
                let x = t.like_f32(&[take, k], values);
                let xt = x.clone().permute(&[1, 0]);
                let gram = Dispatch::float_matmul(xt.into_dispatch(), x.into_dispatch());
                h.add_gram(&Tensor::from_dispatch(gram).to_f32_vec(), take);
            }
        }
        let mut collect =
            Collect { at: HashMap::new(), hessians: Vec::new(), max_rows: self.setting.max_rows, real: None };
        for t in targets {
            // The first reader of an input collects for all of them.
            match collect.hessians.iter().position(|(v, h)| *v == t.input && h.k == t.k) {
                Some(_) => {}
                None => {
                    collect.at.insert(t.op, collect.hessians.len());
                    collect.hessians.push((t.input, Hessian::new(t.k)));
                }
            }
        }
        let exec = ctx.executor(self.name())?;
        let padding = TokenPadding::find(ctx.graph);
        let mut hook = mppq_exec::hooks::Tap(collect);
        let batches = ctx.data.batch_count().min(self.setting.batches.max(1));
        ctx.progress.begin("gptq: input Hessians", batches as u64);
        for b in 0..batches {
            let feeds = ctx.batch(b, self.name())?;
            hook.0.real = padding.as_ref().and_then(|p| p.batch(&feeds)).map(|p| p.real_tokens().to_vec());
            exec.run(feeds, &mut [&mut hook]).in_pass(self.name())?;
            ctx.progress.advance(1);
            if hook.0.hessians.iter().all(|(_, h)| h.rows >= self.setting.max_rows) {
                break;
            }
        }
        ctx.progress.finish();
        Ok(hook.0.hessians.into_iter().collect())
    }
}
