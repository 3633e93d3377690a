//! Block reconstruction: the training engine behind [`crate::training::adaround`], [`crate::training::lsq`] and
//! [`crate::training::block_reconstruction`] (AdaRound, Nagel et al. 2020; LSQ, Esser et al. 2020;
//! BRECQ, Li et al. 2021; QDrop, Wei et al. 2022), on Burn's autodiff on the context's device.
//!
//! The graph is cut into blocks ([`find_blocks`]): each weight operation with its fused
//! activation (`layer`), or single-entry/single-exit sub-graphs holding at most
//! `max_block_ops` weight operations (`block`). Blocks are trained front to back. A block's
//! inputs are cached from the simulated graph with the blocks before it already trained (so it
//! learns to absorb their error), its targets are the float graph's values. One step runs the
//! block on one cached batch in [`TrainingSimulation`] and moves the learned parameters with
//! Adam against: reconstruction error (squared error summed over channels, averaged over the
//! rest, as BRECQ) + λ · AdaRound's rounding regulariser. What is learned:
//! - `rounding`: AdaRound's rectified-sigmoid variable per weight element; after a warm-up
//!   without the regulariser, its β anneals from 20 to 2, pushing every element to round up or
//!   down; the weight is then written as its grid value;
//!   with `hard_rounding` (PPQ's round tuning), each element rounds up or down in every forward,
//!   from round-to-nearest, with a straight-through gradient and no regulariser;
//! - `weight_scale` / `activation_scale`: LSQ step sizes (learnable factors on the calibrated
//!   scales; with `rounding`, the weight scale stays as calibrated);
//! - `activation_offset`: LSQ+'s offsets of asymmetric activations (integer zero points moved
//!   by a learnable shift, rounded with a straight-through gradient).
//!
//! A block stops after `steps` steps, or earlier once its loss has not improved for `patience`
//! steps with every rounding variable settled. A block whose output error over all cached
//! batches, simulated as the pipeline simulates, does not fall is put back as it was.

mod blocks;
pub mod learnables;
mod rounding;
mod steps;
mod tensors;

pub use blocks::{Block, find_blocks, trainable_ops};
use learnables::{Learnables, Scope};
use mppq_ir::quant::variable_of;
use rounding::RoundedWeight;
use steps::step_data;
use tensors::tensor_configs;

use crate::error::{InPass, PassError, Result};
use crate::runtime::block::BlockRunner;
use crate::runtime::params::{ParamView, op_params, write_param};
use crate::runtime::pass::{PassContext, PassReport};
use crate::runtime::statistics::GraphMode;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;
use mppq_exec::simulation::training::{Adam, LearnableScale, TrainingSimulation, backward, require_grad};
use mppq_exec::tensor::Kind;
use mppq_exec::{BurnFakeQuant, Device, Executor, QuantSimulation, Tensor, Value};
use mppq_ir::Graph;
use mppq_ir::quant::{ConfigLocation, TensorQuantConfig, config_at, config_at_mut, sync_dominated};
use mppq_quant::metrics::snr_db_from_ratio;
use serde::{Deserialize, Serialize};

/// How blocks are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// One weight operation (with its fused activation) per block: AdaRound as published.
    Layer,
    /// Single-entry/single-exit sub-graphs (a residual block, say): BRECQ and QDrop.
    Block,
}

/// What a training pass learns and how it cuts blocks: each pass has its own
/// ([`crate::training::adaround::AdaRound`] learns rounding per layer, [`crate::training::lsq::Lsq`] scales per block,
/// [`crate::training::block_reconstruction::BlockReconstruction`] rounding per block); a setting may
/// override any of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Learned {
    pub blocks: BlockKind,
    pub rounding: bool,
    /// With `rounding`: round each element up or down in the forward (starting from
    /// round-to-nearest) with a straight-through gradient and no regulariser, as PPQ's
    /// `RoundTuningPass`; otherwise AdaRound's soft rounding annealed to hard.
    pub hard_rounding: bool,
    /// Adam's rate for the rounding variables, unless the setting gives one.
    pub rounding_rate: f64,
    /// Train the float weights themselves (straight-through; not with `rounding`).
    pub weights: bool,
    pub weight_scale: bool,
    pub activation_scale: bool,
    /// Learn the offsets of asymmetric activation configs too (LSQ+; with `activation_scale`).
    pub activation_offset: bool,
    pub drop: f64,
}

/// The knobs of one training pass (settings sections `adaround`, `lsq`, `block_reconstruction`).
/// The fields left out (`null`) take the pass's own choice ([`Learned`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconstructionSetting {
    /// On or off; absent: on at `optimize` level 3 where the pass belongs to it.
    pub enabled: Option<bool>,
    /// `layer` or `block` (default: the pass's).
    pub blocks: Option<BlockKind>,
    /// Learn the rounding of weights (AdaRound).
    pub rounding: Option<bool>,
    /// Train the float weights with straight-through gradients (LSQ's fine-tuning; not with
    /// `rounding`).
    pub weights: Option<bool>,
    /// Learn weight scales (LSQ; not with `rounding`, which keeps the calibrated scale).
    pub weight_scale: Option<bool>,
    /// Learn activation scales (LSQ).
    pub activation_scale: Option<bool>,
    /// Learn the offsets (zero points) of asymmetric activations with their scales (LSQ+; they
    /// stay integers inside the range).
    pub activation_offset: Option<bool>,
    /// QDrop: probability that an activation element stays float in a training step (0: off).
    pub drop: Option<f64>,
    /// At most this many weight operations per automatic block (`block` only).
    pub max_block_ops: usize,
    /// Optimizer steps per block.
    pub steps: usize,
    /// Cached calibration batches joined into one step along the batch axis (where the block's
    /// tensors have one; else one per step). The papers' steps see 32 images.
    pub batches_per_step: usize,
    /// Adam's rate for rounding variables (default: the pass's; 0.03 for AdaRound's annealed
    /// soft rounding, 0.001 for round tuning's hard one, where each step can flip elements).
    pub rounding_rate: Option<f64>,
    /// Adam's rate for scale factors (a relative change per step).
    pub scale_rate: f64,
    /// Adam's rate for offsets, in grid steps per step.
    pub offset_rate: f64,
    /// Adam's rate for float weights, relative to each weight's root mean square.
    pub weight_rate: f64,
    /// λ, the weight of AdaRound's regulariser.
    pub regularization: f64,
    /// β of the regulariser: start and end of its annealing.
    pub beta: (f64, f64),
    /// Share of the steps run without the regulariser first.
    pub warmup: f64,
    /// Early stop: steps without a lower loss (rounding settled) before a block ends.
    pub patience: usize,
    /// Train on at most this many calibration batches (evenly spaced).
    pub batches: usize,
    /// Bound of the cached block inputs, and of the float targets, MiB each; beyond it fewer
    /// batches are cached (evenly spaced).
    pub cache_mib: usize,
}

impl Default for ReconstructionSetting {
    fn default() -> Self {
        Self {
            enabled: None,
            blocks: None,
            rounding: None,
            weights: None,
            weight_scale: None,
            activation_scale: None,
            activation_offset: None,
            drop: None,
            max_block_ops: 4,
            steps: 500,
            batches_per_step: 1,
            rounding_rate: None,
            scale_rate: 1e-3,
            offset_rate: 1e-2,
            weight_rate: 1e-2,
            regularization: 0.01,
            beta: (20.0, 2.0),
            warmup: 0.2,
            patience: 100,
            batches: 64,
            cache_mib: 1024,
        }
    }
}

impl ReconstructionSetting {
    /// The pass's choices with this setting's overrides.
    pub fn learned(&self, pass: Learned) -> Learned {
        Learned {
            blocks: self.blocks.unwrap_or(pass.blocks),
            rounding: self.rounding.unwrap_or(pass.rounding),
            hard_rounding: pass.hard_rounding,
            rounding_rate: self.rounding_rate.unwrap_or(pass.rounding_rate),
            weights: self.weights.unwrap_or(pass.weights),
            weight_scale: self.weight_scale.unwrap_or(pass.weight_scale),
            activation_scale: self.activation_scale.unwrap_or(pass.activation_scale),
            activation_offset: self.activation_offset.unwrap_or(pass.activation_offset),
            drop: self.drop.unwrap_or(pass.drop),
        }
    }

    /// Checks the values serde cannot; `section` names the settings section in errors.
    pub fn validate(&self, section: &str) -> std::result::Result<(), String> {
        let bad = |what: String| Err(format!("{section}.{what}"));
        if let Some(drop) = self.drop
            && !(0.0..1.0).contains(&drop)
        {
            return bad(format!("drop = {drop}: use a probability in [0, 1)"));
        }
        if !(0.0..=1.0).contains(&self.warmup) {
            return bad(format!("warmup = {}: use a share in [0, 1]", self.warmup));
        }
        if [self.steps, self.batches, self.batches_per_step, self.max_block_ops, self.cache_mib].contains(&0) {
            return bad("steps, batches, batches_per_step, max_block_ops and cache_mib: use at least 1".into());
        }
        if [self.rounding, self.weights, self.weight_scale, self.activation_scale].iter().all(|v| *v == Some(false)) {
            return bad("rounding, weights, weight_scale, activation_scale are all off: nothing to learn".into());
        }
        for (name, v) in [
            ("rounding_rate", self.rounding_rate.unwrap_or(0.0)),
            ("scale_rate", self.scale_rate),
            ("offset_rate", self.offset_rate),
            ("weight_rate", self.weight_rate),
            ("regularization", self.regularization),
            ("beta", self.beta.0),
            ("beta", self.beta.1),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} = {v}: use a finite value ≥ 0"));
            }
        }
        Ok(())
    }
}

/// A learned scale, and offset where it was learned, of one tensor's configs.
struct Learnt {
    scale: Vec<f32>,
    offset: Option<Vec<f32>>,
}

impl Learnt {
    fn write(&self, config: &mut TensorQuantConfig) {
        config.scale.clone_from(&self.scale);
        if let Some(offset) = &self.offset {
            config.offset.clone_from(offset);
        }
    }
}

/// Squared error of `out` against `target`, summed, tracked.
fn squared_error(out: &Tensor, target: &Tensor) -> DispatchTensor {
    let d = Dispatch::float_sub(out.dispatch().clone(), target.dispatch().clone());
    Dispatch::float_sum(Dispatch::float_mul(d.clone(), d))
}

fn scalar(t: &DispatchTensor) -> f64 {
    Tensor::from_dispatch(Dispatch::float_detach(t.clone())).to_f64_vec().first().copied().unwrap_or(f64::NAN)
}

/// Relative squared error of the block's outputs over every cached batch, simulated as the
/// pipeline simulates (integer kernels included).
fn block_error(block: &Graph, ctx: &PassContext<'_>, runner: &BlockRunner, targets: &[Vec<Tensor>]) -> Result<f64> {
    let exec = Executor::new(block, ctx.registry, ctx.device, ctx.opsets).in_pass("reconstruction")?;
    let (mut err, mut energy) = (0.0, 0.0);
    for (i, target) in targets.iter().enumerate() {
        let mut sim = QuantSimulation::new(block, BurnFakeQuant);
        let feeds = runner.feeds(i)?;
        let outs = exec.run(feeds, &mut [&mut sim]).in_pass("reconstruction")?;
        for ((_, out), t) in outs.iter().zip(target) {
            let (Value::Tensor(o), t) = (out, t) else { continue };
            if o.kind() != Kind::Float {
                continue;
            }
            let (o, t) = (o.to_f64_vec(), t.to_f64_vec());
            for (a, b) in o.iter().zip(&t) {
                err += (a - b) * (a - b);
                energy += b * b;
            }
        }
    }
    Ok(if energy > 0.0 { err / energy } else { err })
}

/// What one block's training did.
pub struct BlockOutcome {
    pub before: f64,
    pub after: f64,
    pub kept: bool,
    pub steps: usize,
    /// Calibration batches cached (within `batches` and `cache_mib`), of all.
    pub cached: (usize, usize),
}

/// Trains every block of the graph by `setting`; `pass` names errors and progress.
pub fn reconstruct(
    ctx: &mut PassContext<'_>,
    pass: &'static str,
    setting: &ReconstructionSetting,
    learned: Learned,
) -> Result<PassReport> {
    setting.validate(pass).map_err(|message| PassError::Invalid { pass, message })?;
    let learned = setting.learned(learned);
    if !(learned.rounding || learned.weights || learned.weight_scale || learned.activation_scale) {
        return Ok(PassReport::new(pass, 0, "nothing to learn (rounding, weights and scales off)"));
    }
    let blocks = find_blocks(ctx.graph, learned.blocks, setting.max_block_ops)?;
    if blocks.is_empty() {
        return Ok(PassReport::new(pass, 0, "no quantized weight operation to train"));
    }
    let mut kept = 0;
    let mut lines = Vec::new();
    let total = blocks.len();
    // Targets come from the float model as the pass found it: the weights trained blocks write
    // are on their grid, and a float run through them would pull later targets toward the
    // quantized model.
    let mut float_model = ctx.graph.clone();
    for (b, block) in blocks.iter().enumerate() {
        let outcome = train_block(ctx, &mut float_model, pass, setting, learned, block, b, total)?;
        if outcome.kept {
            kept += 1;
        }
        lines.push(format!(
            "{}: {:.2} → {:.2} dB{} ({} steps, {} of {} batches cached)",
            block.ops.join("+"),
            snr_db_from_ratio(outcome.before),
            snr_db_from_ratio(outcome.after),
            if outcome.kept { "" } else { " (undone)" },
            outcome.steps,
            outcome.cached.0,
            outcome.cached.1
        ));
    }
    if kept > 0 && (learned.weight_scale || learned.activation_scale || learned.weights) {
        // Bias scales are input scale × weight scale: derive them again from the learned ones.
        mppq_quant::calibrate::rederive_biases(ctx.graph).in_pass(pass)?;
    }
    Ok(PassReport::new(
        pass,
        kept,
        format!("{kept} of {total} blocks improved (block output SNR before → after: {})", lines.join("; ")),
    ))
}

/// The leading size of the calibration batches' first input (their batch size), for joining
/// cached batches along it ([`steps`]); `None` when it cannot be read.
fn calibration_batch_size(ctx: &PassContext<'_>) -> Option<usize> {
    let feeds = ctx.data.batch(0, ctx.device).ok()?;
    feeds.iter().find_map(|(_, v)| v.as_tensor()).and_then(|t| t.shape().first().copied())
}

#[allow(clippy::too_many_arguments)]
fn train_block(
    ctx: &mut PassContext<'_>,
    float_model: &mut Graph,
    pass: &'static str,
    setting: &ReconstructionSetting,
    learned: Learned,
    block: &Block,
    index: usize,
    total: usize,
) -> Result<BlockOutcome> {
    let inputs: Vec<&str> = block.inputs.iter().map(String::as_str).collect();
    let outputs: Vec<&str> = block.outputs.iter().map(String::as_str).collect();
    let bytes = setting.cache_mib << 20;
    std::mem::swap(ctx.graph, float_model);
    let float = BlockRunner::new_limited(ctx, pass, &inputs, &outputs, GraphMode::Float, bytes, setting.batches);
    std::mem::swap(ctx.graph, float_model);
    let float = float?;
    let quant = BlockRunner::new_limited(ctx, pass, &inputs, &outputs, GraphMode::Simulated, bytes, setting.batches)?;
    let entries = float.len().min(quant.len());
    if entries == 0 {
        return Err(PassError::Invalid { pass, message: "no calibration batch to train on".into() });
    }
    // Float targets: the float block on float inputs.
    let mut targets: Vec<Vec<Tensor>> = Vec::with_capacity(entries);
    for i in 0..entries {
        let outs = float.run(i, &mut [])?;
        targets.push(outs.into_iter().filter_map(|(_, v)| v.as_tensor().cloned()).collect());
    }
    drop(float);
    let mut graph = quant.graph.clone();
    let before = block_error(&graph, ctx, &quant, &targets)?;

    let energies: Vec<f64> = targets
        .iter()
        .map(|ts| {
            let floats = ts.iter().filter(|t| t.kind() == Kind::Float);
            floats.flat_map(|t| t.to_f64_vec()).map(|v| v * v).sum::<f64>()
        })
        .collect();
    let ad = ctx.device.autodiff();
    let exec = Executor::new(&graph, ctx.registry, &ad, ctx.opsets).in_pass(pass)?;
    let on_ad = |t: &Tensor| t.to_device(&ad).in_pass(pass);
    let cached = (0..entries).map(|i| quant.feeds(i)).collect::<Result<Vec<_>>>()?;
    let lead = calibration_batch_size(ctx);
    let step_batches = step_data(cached, &targets, &energies, setting.batches_per_step, lead);
    let ad_targets: Vec<Vec<Tensor>> =
        step_batches.iter().map(|s| s.targets.iter().map(on_ad).collect::<Result<Vec<_>>>()).collect::<Result<_>>()?;

    // What is learned: rounding variables or float weights, and scale leaves (one per
    // weight config, one per activation tensor; a dominated config follows its root's leaf).
    let scope = Scope::Block {
        ops: &block.ops,
        whole: ctx.graph,
        weights: learned.rounding || learned.weights,
        weight_scales: learned.weight_scale && !learned.rounding,
        activation_scales: learned.activation_scale,
        offsets: learned.activation_offset,
    };
    let learnables = Learnables::discover(&graph, scope)?;
    let mut rounded: Vec<RoundedWeight> = Vec::new();
    let mut float_weights: Vec<(ParamView, DispatchTensor, f64)> = Vec::new();
    for w in &learnables.weights {
        let (Some(weight), Some(config)) = (op_params(&graph, w.config.op)?.weight, config_at(&graph, w.config)) else {
            continue;
        };
        if learned.rounding {
            rounded.extend(RoundedWeight::new(w.var, weight, config.clone(), learned.hard_rounding, &ad));
            continue;
        }
        let rms = (weight.values.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>()
            / weight.values.len().max(1) as f64)
            .sqrt();
        let leaf = require_grad(Tensor::from_f32(&weight.shape, weight.values.clone(), &ad).into_dispatch());
        float_weights.push((weight, leaf, setting.weight_rate * rms.max(1e-12)));
    }
    let mut leaves: Vec<(Vec<ConfigLocation>, LearnableScale)> = Vec::new();
    for group in &learnables.scales {
        if let Some(leaf) = group.leaf(&graph, &ad) {
            leaves.push((group.configs.clone(), leaf));
        }
    }
    let site_leaf = learnables.sites(&graph);

    let mut sim = TrainingSimulation::new(&graph);
    sim.drop = learned.drop;
    sim.prequantized = rounded.iter().map(|r| r.var).collect();
    let steps = setting.steps;
    let warm = (setting.warmup * steps as f64) as usize;
    let mut adam = Adam::default();
    let mut best = f64::INFINITY;
    let mut ema = 0.0;
    let mut since_best = 0;
    let mut done = 0;
    ctx.progress.begin(&format!("{pass} block {}/{total}", index + 1), steps as u64);
    for step in 0..steps {
        let entry = step % step_batches.len();
        sim.substitutes = rounded.iter().map(|r| (r.var, Value::Tensor(Tensor::from_dispatch(r.weight())))).collect();
        sim.learnable = site_leaf.iter().map(|(site, i)| (*site, leaves[*i].1.clone())).collect();
        let feeds = step_batches[entry]
            .feeds
            .iter()
            .map(|(n, v)| match v {
                Value::Tensor(t) => on_ad(t).map(|t| (n.clone(), Value::Tensor(t))),
                other => Ok((n.clone(), other.clone())),
            })
            .collect::<Result<Vec<_>>>()?;
        let outs = exec.run(feeds, &mut [&mut sim]).in_pass(pass)?;
        // An output computed off the autodiff device (inside an If branch or a loop body, which
        // run on their own executors) has no gradient to follow: the block is left as it is.
        if outs.iter().any(|(_, v)| v.as_tensor().is_some_and(|t| !Device::of(t.dispatch()).is_autodiff())) {
            ctx.progress.finish();
            return Ok(BlockOutcome {
                before,
                after: before,
                kept: false,
                steps: 0,
                cached: (entries, ctx.data.batch_count()),
            });
        }
        let mut loss: Option<DispatchTensor> = None;
        for ((_, out), target) in outs.iter().zip(&ad_targets[entry]) {
            // Shapes, indices and masks among the block's outputs carry no error to learn from.
            let Value::Tensor(out) = out else { continue };
            if out.kind() != Kind::Float || target.kind() != Kind::Float || out.shape() != target.shape() {
                continue;
            }
            let l = squared_error(out, target);
            loss = Some(match loss {
                Some(acc) => Dispatch::float_add(acc, l),
                None => l,
            });
        }
        let Some(loss) = loss else { break };
        // Relative to round-to-nearest: 1 where training starts from, whatever the block's scale.
        let mut loss = Dispatch::float_div_scalar(
            loss,
            Scalar::from((step_batches[entry].energy * before).max(f64::MIN_POSITIVE)),
        );
        let rec = scalar(&loss);
        let annealing = step >= warm && learned.rounding && !learned.hard_rounding;
        if annealing {
            let t = (step - warm) as f64 / (steps - warm).max(1) as f64;
            let beta = setting.beta.1 + (setting.beta.0 - setting.beta.1) * (1.0 - t);
            for r in &rounded {
                let reg = Dispatch::float_mul_scalar(r.regularizer(beta), Scalar::from(setting.regularization));
                loss = Dispatch::float_add(loss, reg);
            }
        }
        let grads = backward(loss);
        let mut params: Vec<&mut DispatchTensor> = Vec::new();
        let mut rates = Vec::new();
        for r in rounded.iter_mut() {
            params.push(&mut r.v);
            rates.push(learned.rounding_rate);
        }
        for (_, leaf, rate) in float_weights.iter_mut() {
            params.push(leaf);
            rates.push(*rate);
        }
        for (_, leaf) in leaves.iter_mut() {
            params.push(&mut leaf.factor);
            rates.push(setting.scale_rate);
            if let Some(offset) = leaf.offset.as_mut() {
                params.push(&mut offset.shift);
                rates.push(setting.offset_rate);
            }
        }
        adam.step(&mut params, &rates, &grads);
        done = step + 1;
        ctx.progress.advance(1);
        if step % 10 == 0 {
            ctx.progress.note(&format!("loss {rec:.3e}"));
        }
        // Early stop on the running mean of the loss (one batch's loss is noisy), once the
        // rounding (if learned) has settled.
        ema = if step == 0 { rec } else { 0.9 * ema + 0.1 * rec };
        if ema < best * 0.999 {
            best = ema;
            since_best = 0;
        } else {
            since_best += 1;
        }
        let settled = !annealing || rounded.iter().all(|r| r.settled() > 0.99);
        if since_best >= setting.patience && settled && (annealing || !learned.rounding) {
            break;
        }
    }
    ctx.progress.finish();

    // The learned values into the block graph, measured as the pipeline simulates.
    let mut written: Vec<ParamView> = Vec::new();
    for r in &rounded {
        let hard = r.hard();
        write_param(&mut graph, &hard)?;
        written.push(hard);
    }
    for (view, leaf, _) in &float_weights {
        let values = Tensor::from_dispatch(Dispatch::float_detach(leaf.clone())).to_f32_vec();
        let trained = ParamView { values, ..view.clone() };
        write_param(&mut graph, &trained)?;
        written.push(trained);
    }
    // (the block's configs, tensor name, the config it had, the learned scale and offset)
    let scales: Vec<(&[ConfigLocation], String, TensorQuantConfig, Learnt)> = leaves
        .iter()
        .filter_map(|(locs, leaf)| {
            let first = *locs.first()?;
            let var = variable_of(&graph, first)?;
            let config = config_at(&graph, first)?.clone();
            let learnt = Learnt { scale: leaf.values(), offset: leaf.offsets(&config) };
            Some((locs.as_slice(), graph.var_name(var).to_string(), config, learnt))
        })
        .collect();
    for (locs, _, _, learnt) in &scales {
        for loc in locs.iter() {
            if let Some(c) = config_at_mut(&mut graph, *loc) {
                learnt.write(c);
            }
        }
    }
    sync_dominated(&mut graph).in_pass(pass)?;
    if !leaves.is_empty() || !float_weights.is_empty() {
        // Bias scales are input scale × weight scale (the integer kernels require it).
        mppq_quant::calibrate::rederive_biases(&mut graph).in_pass(pass)?;
    }
    let after = block_error(&graph, ctx, &quant, &targets)?;
    let kept = after < before;
    if kept {
        for view in &written {
            let var = ctx.graph.var_named(&view.name).in_pass(pass)?;
            write_param(ctx.graph, &ParamView { var, ..view.clone() })?;
        }
        for (_, name, original, learnt) in scales {
            let Some(var) = ctx.graph.var_id(&name) else { continue };
            for loc in tensor_configs(ctx.graph, var, &original).unwrap_or_default() {
                if let Some(c) = config_at_mut(ctx.graph, loc) {
                    learnt.write(c);
                }
            }
        }
        sync_dominated(ctx.graph).in_pass(pass)?;
    }
    Ok(BlockOutcome { before, after, kept, steps: done, cached: (entries, ctx.data.batch_count()) })
}
