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
use steps::{StepData, step_data};
use tensors::tensor_configs;

use crate::error::{InPass, PassError, Result};
use crate::runtime::block::BlockRunner;
use crate::runtime::params::{ParamView, op_params, write_param};
use crate::runtime::pass::{PassContext, PassReport};
use crate::runtime::statistics::GraphMode;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Scalar;
use mppq_exec::simulation::training::{Adam, LearnableScale, QuantSite, TrainingSimulation, backward, require_grad};
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
        // Ceilings: a mistyped count would train for days or ask for all memory.
        for (name, value, max) in [
            ("steps", self.steps, 1_000_000),
            ("patience", self.patience, 1_000_000),
            ("batches", self.batches, 1_000_000),
            ("batches_per_step", self.batches_per_step, 10_000),
            ("max_block_ops", self.max_block_ops, 100_000),
            ("cache_mib", self.cache_mib, 1 << 30),
        ] {
            if value > max {
                return bad(format!("{name} = {value}: use at most {max}"));
            }
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

/// The squared error of a step's block outputs against their targets, summed over the outputs
/// in order, tracked; `None` when no output carries an error to learn from.
fn reconstruction_error(outs: &[(String, Value)], targets: &[Tensor]) -> Option<DispatchTensor> {
    let mut loss: Option<DispatchTensor> = None;
    for ((_, out), target) in outs.iter().zip(targets) {
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
    loss
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

/// Trains one block (see the module doc): caches its data, makes its trainable variables, runs
/// the steps, writes what was learned into the block and keeps it in `ctx.graph` only where the
/// block's output error fell.
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
    let cache = BlockCache::new(ctx, float_model, pass, setting, block)?;
    let cached = (cache.entries, ctx.data.batch_count());
    let mut graph = cache.quant.graph.clone();
    let before = block_error(&graph, ctx, &cache.quant, &cache.targets)?;
    let ad = ctx.device.autodiff();
    let exec = Executor::new(&graph, ctx.registry, &ad, ctx.opsets).in_pass(pass)?;
    let steps = cache.steps(ctx, pass, setting, &ad)?;
    let mut vars = Trainables::new(ctx, &graph, block, learned, setting, &ad)?;
    let label = format!("{pass} block {}/{total}", index + 1);
    let Some(done) = run_steps(ctx, pass, &label, &exec, &graph, &steps, &mut vars, learned, setting, before)? else {
        return Ok(BlockOutcome { before, after: before, kept: false, steps: 0, cached });
    };
    let learnt = vars.write_into(&mut graph, pass)?;
    let after = block_error(&graph, ctx, &cache.quant, &cache.targets)?;
    let kept = after < before;
    if kept {
        learnt.write_into(ctx.graph, pass)?;
    }
    Ok(BlockOutcome { before, after, kept, steps: done, cached })
}

/// What one block trains on: its simulated runner with the cached inputs and, per cached batch,
/// the float block's outputs (the targets).
struct BlockCache {
    quant: BlockRunner,
    targets: Vec<Vec<Tensor>>,
    /// Cached batches (within `batches` and `cache_mib`).
    entries: usize,
}

impl BlockCache {
    /// Caches the block's inputs from the simulated graph, and its targets from the float block
    /// of `float_model` on float inputs.
    fn new(
        ctx: &mut PassContext<'_>,
        float_model: &mut Graph,
        pass: &'static str,
        setting: &ReconstructionSetting,
        block: &Block,
    ) -> Result<Self> {
        let inputs: Vec<&str> = block.inputs.iter().map(String::as_str).collect();
        let outputs: Vec<&str> = block.outputs.iter().map(String::as_str).collect();
        let bytes = setting.cache_mib << 20;
        std::mem::swap(ctx.graph, float_model);
        let float = BlockRunner::new_limited(ctx, pass, &inputs, &outputs, GraphMode::Float, bytes, setting.batches);
        std::mem::swap(ctx.graph, float_model);
        let float = float?;
        let quant =
            BlockRunner::new_limited(ctx, pass, &inputs, &outputs, GraphMode::Simulated, bytes, setting.batches)?;
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
        Ok(Self { quant, targets, entries })
    }

    /// The training steps' data ([`step_data`]), with their targets on the autodiff device `ad`.
    fn steps(
        &self,
        ctx: &PassContext<'_>,
        pass: &'static str,
        setting: &ReconstructionSetting,
        ad: &Device,
    ) -> Result<Steps> {
        let energies: Vec<f64> = self
            .targets
            .iter()
            .map(|ts| {
                let floats = ts.iter().filter(|t| t.kind() == Kind::Float);
                floats.flat_map(|t| t.to_f64_vec()).map(|v| v * v).sum::<f64>()
            })
            .collect();
        let cached = (0..self.entries).map(|i| self.quant.feeds(i)).collect::<Result<Vec<_>>>()?;
        let lead = calibration_batch_size(ctx);
        let data = step_data(cached, &self.targets, &energies, setting.batches_per_step, lead);
        let targets: Vec<Vec<Tensor>> = data
            .iter()
            .map(|s| s.targets.iter().map(|t| t.to_device(ad).in_pass(pass)).collect::<Result<Vec<_>>>())
            .collect::<Result<_>>()?;
        Ok(Steps { data, targets })
    }
}

/// The training steps' data, and their targets on the autodiff device.
struct Steps {
    data: Vec<StepData>,
    targets: Vec<Vec<Tensor>>,
}

/// What a block learns, as tracked leaves: rounding variables, float weights (with their Adam
/// rates), and scale leaves with the configs each writes; `site_leaf` maps every config of the
/// block to its leaf.
struct Trainables {
    rounded: Vec<RoundedWeight>,
    float_weights: Vec<(ParamView, DispatchTensor, f64)>,
    leaves: Vec<(Vec<ConfigLocation>, LearnableScale)>,
    site_leaf: Vec<(QuantSite, usize)>,
}

impl Trainables {
    /// The block's learnables ([`Learnables`]: rounding variables or float weights, one scale
    /// leaf per weight config and per activation tensor; a dominated config follows its root's
    /// leaf) as leaves on the autodiff device `ad`.
    fn new(
        ctx: &PassContext<'_>,
        graph: &Graph,
        block: &Block,
        learned: Learned,
        setting: &ReconstructionSetting,
        ad: &Device,
    ) -> Result<Self> {
        let scope = Scope::Block {
            ops: &block.ops,
            whole: ctx.graph,
            weights: learned.rounding || learned.weights,
            weight_scales: learned.weight_scale && !learned.rounding,
            activation_scales: learned.activation_scale,
            offsets: learned.activation_offset,
        };
        let learnables = Learnables::discover(graph, scope)?;
        let mut rounded: Vec<RoundedWeight> = Vec::new();
        let mut float_weights: Vec<(ParamView, DispatchTensor, f64)> = Vec::new();
        for w in &learnables.weights {
            let (Some(weight), Some(config)) = (op_params(graph, w.config.op)?.weight, config_at(graph, w.config))
            else {
                continue;
            };
            if learned.rounding {
                rounded.extend(RoundedWeight::new(w.var, weight, config.clone(), learned.hard_rounding, ad));
                continue;
            }
            let rms = (weight.values.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>()
                / weight.values.len().max(1) as f64)
                .sqrt();
            let leaf = require_grad(Tensor::from_f32(&weight.shape, weight.values.clone(), ad).into_dispatch());
            float_weights.push((weight, leaf, setting.weight_rate * rms.max(1e-12)));
        }
        let mut leaves: Vec<(Vec<ConfigLocation>, LearnableScale)> = Vec::new();
        for group in &learnables.scales {
            if let Some(leaf) = group.leaf(graph, ad) {
                leaves.push((group.configs.clone(), leaf));
            }
        }
        let site_leaf = learnables.sites(graph);
        Ok(Self { rounded, float_weights, leaves, site_leaf })
    }

    /// Every tracked leaf with its Adam rate: rounding variables, float weights, scale factors
    /// (each followed by its offset shift, where learned).
    fn params(&mut self, learned: Learned, setting: &ReconstructionSetting) -> (Vec<&mut DispatchTensor>, Vec<f64>) {
        let mut params: Vec<&mut DispatchTensor> = Vec::new();
        let mut rates = Vec::new();
        for r in self.rounded.iter_mut() {
            params.push(&mut r.v);
            rates.push(learned.rounding_rate);
        }
        for (_, leaf, rate) in self.float_weights.iter_mut() {
            params.push(leaf);
            rates.push(*rate);
        }
        for (_, leaf) in self.leaves.iter_mut() {
            params.push(&mut leaf.factor);
            rates.push(setting.scale_rate);
            if let Some(offset) = leaf.offset.as_mut() {
                params.push(&mut offset.shift);
                rates.push(setting.offset_rate);
            }
        }
        (params, rates)
    }

    /// Writes the learned values into the block `graph` (rounded weights on their grid, float
    /// weights, scales and offsets; dominated configs follow, bias scales are derived again) and
    /// returns them, for [`LearntBlock::write_into`] the full graph.
    fn write_into(&self, graph: &mut Graph, pass: &'static str) -> Result<LearntBlock> {
        let mut weights: Vec<ParamView> = Vec::new();
        for r in &self.rounded {
            let hard = r.hard();
            write_param(graph, &hard)?;
            weights.push(hard);
        }
        for (view, leaf, _) in &self.float_weights {
            let values = Tensor::from_dispatch(Dispatch::float_detach(leaf.clone())).to_f32_vec();
            let trained = ParamView { values, ..view.clone() };
            write_param(graph, &trained)?;
            weights.push(trained);
        }
        // (the block's configs, tensor name, the config it had, the learned scale and offset)
        let scales: Vec<(Vec<ConfigLocation>, String, TensorQuantConfig, Learnt)> = self
            .leaves
            .iter()
            .filter_map(|(locs, leaf)| {
                let first = *locs.first()?;
                let var = variable_of(graph, first)?;
                let config = config_at(graph, first)?.clone();
                let learnt = Learnt { scale: leaf.values(), offset: leaf.offsets(&config) };
                Some((locs.clone(), graph.var_name(var).to_string(), config, learnt))
            })
            .collect();
        for (locs, _, _, learnt) in &scales {
            for loc in locs.iter() {
                if let Some(c) = config_at_mut(graph, *loc) {
                    learnt.write(c);
                }
            }
        }
        sync_dominated(graph).in_pass(pass)?;
        if !self.leaves.is_empty() || !self.float_weights.is_empty() {
            // Bias scales are input scale × weight scale (the integer kernels require it).
            mppq_quant::calibrate::rederive_biases(graph).in_pass(pass)?;
        }
        Ok(LearntBlock {
            weights,
            scales: scales.into_iter().map(|(_, name, original, learnt)| (name, original, learnt)).collect(),
        })
    }
}

/// What a block learned, by name: its weights and, per tensor, the config it had and the learned
/// scale and offset.
struct LearntBlock {
    weights: Vec<ParamView>,
    scales: Vec<(String, TensorQuantConfig, Learnt)>,
}

impl LearntBlock {
    /// Keeps what the block learned: writes it into `graph` (the full one), each scale to every
    /// config that quantized its tensor as it had been; dominated configs follow.
    fn write_into(self, graph: &mut Graph, pass: &'static str) -> Result<()> {
        for view in &self.weights {
            let var = graph.var_named(&view.name).in_pass(pass)?;
            write_param(graph, &ParamView { var, ..view.clone() })?;
        }
        for (name, original, learnt) in self.scales {
            let Some(var) = graph.var_id(&name) else { continue };
            for loc in tensor_configs(graph, var, &original).unwrap_or_default() {
                if let Some(c) = config_at_mut(graph, loc) {
                    learnt.write(c);
                }
            }
        }
        sync_dominated(graph).in_pass(pass)?;
        Ok(())
    }
}

/// Runs the training steps (see the module doc) on `exec` (the block `graph` on the autodiff
/// device) and moves `vars` with Adam; returns the steps done, or `None` when an output left the
/// autodiff device (then nothing can train: the block stays as it is).
#[allow(clippy::too_many_arguments)]
fn run_steps(
    ctx: &mut PassContext<'_>,
    pass: &'static str,
    label: &str,
    exec: &Executor,
    graph: &Graph,
    steps_data: &Steps,
    vars: &mut Trainables,
    learned: Learned,
    setting: &ReconstructionSetting,
    before: f64,
) -> Result<Option<usize>> {
    let ad = exec.device();
    let on_ad = |t: &Tensor| t.to_device(ad).in_pass(pass);
    let mut sim = TrainingSimulation::new(graph);
    sim.drop = learned.drop;
    sim.prequantized = vars.rounded.iter().map(|r| r.var).collect();
    let steps = setting.steps;
    let warm = (setting.warmup * steps as f64) as usize;
    let mut adam = Adam::default();
    let mut best = f64::INFINITY;
    let mut ema = 0.0;
    let mut since_best = 0;
    let mut done = 0;
    ctx.progress.begin(label, steps as u64);
    for step in 0..steps {
        let entry = step % steps_data.data.len();
        sim.substitutes =
            vars.rounded.iter().map(|r| (r.var, Value::Tensor(Tensor::from_dispatch(r.weight())))).collect();
        sim.learnable = vars.site_leaf.iter().map(|(site, i)| (*site, vars.leaves[*i].1.clone())).collect();
        let feeds = steps_data.data[entry]
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
            return Ok(None);
        }
        let Some(loss) = reconstruction_error(&outs, &steps_data.targets[entry]) else { break };
        // Relative to round-to-nearest: 1 where training starts from, whatever the block's scale.
        let mut loss = Dispatch::float_div_scalar(
            loss,
            Scalar::from((steps_data.data[entry].energy * before).max(f64::MIN_POSITIVE)),
        );
        let rec = scalar(&loss);
        let annealing = step >= warm && learned.rounding && !learned.hard_rounding;
        if annealing {
            let t = (step - warm) as f64 / (steps - warm).max(1) as f64;
            let beta = setting.beta.1 + (setting.beta.0 - setting.beta.1) * (1.0 - t);
            for r in &vars.rounded {
                let reg = Dispatch::float_mul_scalar(r.regularizer(beta), Scalar::from(setting.regularization));
                loss = Dispatch::float_add(loss, reg);
            }
        }
        let grads = backward(loss);
        let (mut params, rates) = vars.params(learned, setting);
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
        let settled = !annealing || vars.rounded.iter().all(|r| r.settled() > 0.99);
        if since_best >= setting.patience && settled && (annealing || !learned.rounding) {
            break;
        }
    }
    ctx.progress.finish();
    Ok(Some(done))
}
