//! `gptq`: the codes of every block-wise weight chosen by GPTQ ([`mppq_quant::blockwise::gptq`])
//! from the Hessian of the layer's inputs on calibration data, instead of round-to-nearest.
//! The inputs are the float model's (one run over the batches for every layer at once, not the
//! layer-by-layer run of the reference code, which would see earlier layers' errors). Each
//! weight is written as its dequantized codes, so the simulation and the exports find exactly
//! GPTQ's codes. Guarded: kept only where it raises the output SNR.

use crate::error::{InPass, Result};
use crate::runtime::guard::Guard;
use crate::runtime::params::{op_params, write_param};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_exec::Tensor;
use mppq_ir::OpId;
use mppq_ir::quant::{ConfigSide, QuantizationState};
use mppq_quant::blockwise::BlockScheme;
use mppq_quant::blockwise::gptq::{Hessian, gptq};
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

/// A weight to solve: the operation and its weight slot (the input it multiplies is slot 0).
struct Target {
    op: OpId,
    slot: usize,
}

fn targets(graph: &mppq_ir::Graph) -> Vec<Target> {
    let mut out = Vec::new();
    for (op, o) in graph.operations() {
        let Some(qc) = o.quant_config.as_ref() else { continue };
        let Some(slot) = qc
            .input_configs
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.block.is_some() && c.state == QuantizationState::Activated))
        else {
            continue;
        };
        let (Some(Some(input)), Some(Some(weight))) = (o.inputs().first().copied(), o.inputs().get(slot).copied())
        else {
            continue;
        };
        // A weight read elsewhere too cannot be rewritten for this reader alone.
        if slot != 0 && graph.consumers(weight).len() == 1 && !graph.variable(input).is_ok_and(|v| v.is_parameter()) {
            out.push(Target { op, slot });
        }
    }
    out
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
        let (mut solved, mut kept_rtn) = (0, 0);
        for t in &targets {
            let Some(h) = hessians.get(&t.op).filter(|h| h.rows > 0) else {
                kept_rtn += 1;
                continue;
            };
            let params = op_params(ctx.graph, t.op)?;
            let Some(mut weight) = params.weight else { continue };
            let op = ctx.graph.operation(t.op).in_pass(self.name())?;
            let Some(config) = op.quant_config.as_ref().and_then(|c| c.input_configs[t.slot].clone()) else { continue };
            let scheme = BlockScheme::of(&config, &weight.name).in_pass(self.name())?;
            let Some(grid) = config.block_grid(&weight.shape).in_pass(self.name())? else { continue };
            let Some(solution) = gptq(&grid.runs(&weight.values), &grid, scheme, h, self.setting.damp) else {
                kept_rtn += 1;
                continue;
            };
            grid.write_runs(&solution.dequantized(&grid), &mut weight.values);
            write_param(ctx.graph, &weight)?;
            let loc = mppq_ir::quant::ConfigLocation { op: t.op, side: ConfigSide::Input, index: t.slot };
            if let Some(c) = mppq_ir::quant::config_at_mut(ctx.graph, loc) {
                c.scale = solution.scale;
                c.offset = solution.offset;
            }
            solved += 1;
        }
        Ok(PassReport::new(
            self.name(),
            solved,
            format!(
                "{solved} block-wise weights solved by GPTQ, {kept_rtn} kept at round-to-nearest (no input rows or no Hessian factor)"
            ),
        ))
    }
}

impl Gptq {
    /// The Hessian of every target's input, from one float run over the calibration batches.
    fn hessians(&self, ctx: &mut PassContext<'_>, targets: &[Target]) -> Result<HashMap<OpId, Hessian>> {
        struct Collect {
            at: HashMap<(OpId, usize), usize>,
            hessians: Vec<(OpId, Hessian)>,
            max_rows: usize,
        }
        impl mppq_exec::hooks::TensorTap for Collect {
            fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &mppq_exec::Value) {
                let Some(&i) = self.at.get(&(op, slot)).filter(|_| side == ConfigSide::Input) else { return };
                let (_, h) = &mut self.hessians[i];
                let (k, room) = (h.k, self.max_rows.saturating_sub(h.rows));
                let Some(t) = value.as_tensor().filter(|t| t.shape().last() == Some(&k) && room > 0) else { return };
                let Ok(t) = t.clone().cast(mppq_ir::DataType::Float) else { return };
                let rows = t.numel() / k.max(1);
                // The first rows up to the room left; Xᵀ X by the executor's GEMM.
                let take = rows.min(room);
                let x = t.reshape(&[rows, k]).slice(&[burn::tensor::Slice::from(0..take)]);
                let xt = x.clone().permute(&[1, 0]);
                let gram = Dispatch::float_matmul(xt.into_dispatch(), x.into_dispatch());
                h.add_gram(&Tensor::from_dispatch(gram).to_f32_vec(), take);
            }
        }
        let mut collect = Collect { at: HashMap::new(), hessians: Vec::new(), max_rows: self.setting.max_rows };
        for t in targets {
            let k = op_params(ctx.graph, t.op)?
                .weight
                .and_then(|w| {
                    let op = ctx.graph.operation(t.op).ok()?;
                    let config = op.quant_config.as_ref()?.input_configs.get(t.slot)?.as_ref()?;
                    Some(config.block_grid(&w.shape).ok()??.run)
                })
                .unwrap_or(0);
            if k > 0 {
                collect.at.insert((t.op, 0), collect.hessians.len());
                collect.hessians.push((t.op, Hessian::new(k)));
            }
        }
        let exec = ctx.executor(self.name())?;
        let mut hook = mppq_exec::hooks::Tap(collect);
        let batches = ctx.data.batch_count().min(self.setting.batches.max(1));
        ctx.progress.begin("gptq: input Hessians", batches as u64);
        for b in 0..batches {
            let feeds = ctx.batch(b, self.name())?;
            exec.run(feeds, &mut [&mut hook]).in_pass(self.name())?;
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        Ok(hook.0.hessians.into_iter().collect())
    }
}
