//! Differentiable quantization simulation: what the training passes (AdaRound, LSQ, block
//! reconstruction) and quantization-aware training run, on an autodiff device
//! ([`crate::Device::autodiff`]: the CPU or wgpu device wrapped by Burn's autodiff).
//!
//! Fake quantization here passes gradients with the straight-through estimator (STE): round's
//! gradient is taken as 1 and the clamp's as 0 outside the range. With a [`LearnableScale`]
//! that is LSQ's gradient (Esser et al., 2020): `∂y/∂s = round(v) − v` inside the range and
//! `q_min − o` or `q_max − o` outside it, `v = x / s`.
//!
//! Forward numbers equal [`super::fake_quant`]'s bit for bit: the rounded value enters as
//! `detach(round(v)) + (v − detach(v))`, and `v − v` is exactly 0. Floating formats (FP8) pass
//! gradients straight through the whole fake quantization, with their scale fixed.

use super::fake_quant::{Plan, chained, plan, round_chain};
use crate::device::Device;
use crate::error::{ExecError, Result};
use crate::hooks::{ExecHook, OpInfo};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{AutodiffBackend, Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{FloatDType, Scalar, Shape};
use mppq_ir::quant::{ConfigSide, TensorQuantConfig};
use mppq_ir::{Graph, OpId, VarId};
use std::collections::{HashMap, HashSet};

/// A scale training may change: the calibrated scale times a learnable factor (a tracked leaf,
/// 1 at the start). The forward starts from exactly the calibrated numbers (`s · 1 = s`), and an
/// optimizer's steps on the factor are relative, whatever the scale's magnitude.
#[derive(Clone, Debug)]
pub struct LearnableScale {
    /// The calibrated scale, one per channel (one per tensor).
    pub base: Vec<f32>,
    /// The learnable factor, shape `[base.len()]`.
    pub factor: DispatchTensor,
    /// LSQ+'s learnable offset (Bhalgat et al., 2020), for asymmetric configs; `None`: the
    /// config's offset stays.
    pub offset: Option<LearnableOffset>,
}

/// An offset training may change: the calibrated zero point plus a learnable shift in grid
/// steps (a tracked leaf, 0 at the start). The shift enters rounded, with a straight-through
/// gradient, and the offset stays inside the integer range: a zero point is an integer of the
/// quantized type in every runtime, so the simulation never uses one an export could not write.
#[derive(Clone, Debug)]
pub struct LearnableOffset {
    /// The calibrated offset, one per channel.
    pub base: Vec<f32>,
    /// The learnable shift, shape `[base.len()]`.
    pub shift: DispatchTensor,
}

impl LearnableScale {
    /// A factor of 1 per channel of `base`, tracked on `device` (an autodiff device).
    pub fn new(base: Vec<f32>, device: &Device) -> Self {
        let factor = Tensor::from_f32(&[base.len()], vec![1.0; base.len()], device).into_dispatch();
        Self { base, factor: require_grad(factor), offset: None }
    }

    /// Also learns the offset, starting from `base` (one per channel, as the scale).
    pub fn with_offset(mut self, base: Vec<f32>, device: &Device) -> Self {
        let shift = Tensor::from_f32(&[base.len()], vec![0.0; base.len()], device).into_dispatch();
        self.offset = Some(LearnableOffset { base, shift: require_grad(shift) });
        self
    }

    /// The scale now, per channel.
    pub fn values(&self) -> Vec<f32> {
        let factor = Tensor::from_dispatch(Dispatch::float_detach(self.factor.clone())).to_f32_vec();
        self.base.iter().zip(factor).map(|(b, f)| b * f).collect()
    }

    /// The offset now, per channel, as the forward uses it under `config` (`None` when the
    /// offset is not learned).
    pub fn offsets(&self, config: &TensorQuantConfig) -> Option<Vec<f32>> {
        let learned = self.offset.as_ref()?;
        let offset = learned.broadcast(1, Some(0), config.quant_min as f64, config.quant_max as f64);
        Some(Tensor::from_dispatch(Dispatch::float_detach(offset)).to_f32_vec())
    }

    /// `base · factor` shaped to broadcast over a tensor of `rank` along `axis`.
    fn broadcast(&self, rank: usize, axis: Option<usize>) -> DispatchTensor {
        let factor = Dispatch::float_reshape(self.factor.clone(), broadcast_shape(rank, axis, self.base.len()));
        Dispatch::float_mul(factor, constant(&self.base, rank, axis, &self.factor))
    }
}

impl LearnableOffset {
    /// `clamp(base + round(shift), qmin, qmax)` (round with a straight-through gradient) shaped
    /// to broadcast over a tensor of `rank` along `axis`.
    fn broadcast(&self, rank: usize, axis: Option<usize>, qmin: f64, qmax: f64) -> DispatchTensor {
        let detached = Dispatch::float_detach(self.shift.clone());
        let rounded = Dispatch::float_round(detached.clone());
        let shift = Dispatch::float_add(rounded, Dispatch::float_sub(self.shift.clone(), detached));
        let shift = Dispatch::float_reshape(shift, broadcast_shape(rank, axis, self.base.len()));
        let offset = Dispatch::float_add(constant(&self.base, rank, axis, &self.shift), shift);
        Dispatch::float_clamp(offset, Scalar::from(qmin), Scalar::from(qmax))
    }
}

/// Marks a float tensor as a leaf whose gradient the backward pass keeps.
pub fn require_grad(t: DispatchTensor) -> DispatchTensor {
    Dispatch::float_set_require_grad(t, true)
}

/// Runs the backward pass from `loss` (a tracked tensor; its elements are summed).
pub fn backward(loss: DispatchTensor) -> Gradients {
    Gradients(<Dispatch as AutodiffBackend>::backward(loss))
}

/// The gradients of one backward pass.
pub struct Gradients(<Dispatch as AutodiffBackend>::Gradients);

impl Gradients {
    /// The gradient of a tracked leaf (plain tensor), if the loss depended on it.
    pub fn of(&self, leaf: &DispatchTensor) -> Option<DispatchTensor> {
        <Dispatch as AutodiffBackend>::grad(leaf, &self.0)
    }
}

/// Fake quantization of `x` under `config` with straight-through gradients; `scale` replaces
/// the config's scale (linear configs only). Integer tensors pass unchanged.
pub fn ste_fake_quant(x: Tensor, config: &TensorQuantConfig, scale: Option<&LearnableScale>) -> Result<Tensor> {
    if x.kind() != Kind::Float || x.stand_in_for().is_some_and(crate::tensor::is_low_precision) {
        return Ok(x);
    }
    let shape = x.shape();
    let dtype = x.dtype();
    let plan = plan(config, &shape)?;
    let x = x.cast(mppq_ir::DataType::Float)?.into_dispatch();
    let y = match &plan {
        Plan::Linear { ch, qmin, qmax, rounding } => {
            let s = match scale {
                Some(learned) => {
                    if learned.base.len() != ch.scale.len() {
                        return Err(channel_mismatch("scale", learned.base.len(), ch.scale.len()));
                    }
                    learned.broadcast(shape.len(), ch.axis)
                }
                None => constant(&ch.scale, shape.len(), ch.axis, &x),
            };
            let v = Dispatch::float_div(x, s.clone());
            let detached = Dispatch::float_detach(v.clone());
            let rounded = round_chain(detached.clone(), *rounding);
            let r = Dispatch::float_add(rounded, Dispatch::float_sub(v, detached));
            let o = match scale.and_then(|l| l.offset.as_ref()) {
                Some(learned) if learned.base.len() == ch.offset.len() => {
                    learned.broadcast(shape.len(), ch.axis, *qmin, *qmax)
                }
                Some(learned) => return Err(channel_mismatch("offset", learned.base.len(), ch.offset.len())),
                None => constant(&ch.offset, shape.len(), ch.axis, &r),
            };
            let q = Dispatch::float_add(r, o.clone());
            let q = Dispatch::float_clamp(q, Scalar::from(*qmin), Scalar::from(*qmax));
            Dispatch::float_mul(Dispatch::float_sub(q, o), s)
        }
        Plan::Floating { .. } => {
            let detached = Dispatch::float_detach(x.clone());
            let fq = chained(detached.clone(), &plan, &shape);
            Dispatch::float_add(fq, Dispatch::float_sub(x, detached))
        }
    };
    Tensor::from_dispatch(y).cast(dtype)
}

fn channel_mismatch(what: &str, learned: usize, config: usize) -> ExecError {
    ExecError::Ir(mppq_ir::IrError::InvalidQuantConfig(format!(
        "learnable {what} has {learned} channels, the config {config}"
    )))
}

/// The shape of `channels` values broadcast over a tensor of `rank` along `axis` (all ones but
/// the axis; per tensor, `[1, …]`).
fn broadcast_shape(rank: usize, axis: Option<usize>, channels: usize) -> Shape {
    let mut shape = vec![1usize; rank.max(1)];
    if let Some(a) = axis {
        shape[a] = channels;
    }
    Shape::from(shape)
}

/// Per-channel (or per-tensor) constants shaped to broadcast over a tensor of `rank`, on the
/// device of `like`.
fn constant(values: &[f32], rank: usize, axis: Option<usize>, like: &DispatchTensor) -> DispatchTensor {
    let data = burn::tensor::TensorData::new(values.to_vec(), broadcast_shape(rank, axis, values.len()));
    Dispatch::float_cast(Dispatch::float_from_data(data, &like.device()), FloatDType::F32)
}

/// Where one fake quantization sits: an operation, a side and a slot.
pub type QuantSite = (OpId, ConfigSide, usize);

/// The quantization simulation of training: every active config of the graph is applied with
/// straight-through gradients ([`ste_fake_quant`]), in float kernels (the integer kernels of
/// [`super::QuantSimulation`] are not differentiable; their results differ from float math by
/// at most one requantization step).
///
/// Set before each forward:
/// - `substitutes`: values read in place of variables (trainable weights: tracked leaves, or
///   expressions of them such as AdaRound's soft-rounded weight);
/// - `learnable`: learnable scales by site; other sites use their config's scale;
/// - `prequantized`: variables that arrive on their grid already (AdaRound's weights), whose
///   input configs are skipped;
/// - `drop`: QDrop (Wei et al., 2022): the probability that an activation element stays float
///   in a training forward (weights are always quantized); 0 turns it off.
pub struct TrainingSimulation<'a> {
    pub graph: &'a Graph,
    pub substitutes: HashMap<VarId, Value>,
    pub learnable: HashMap<QuantSite, LearnableScale>,
    pub prequantized: HashSet<VarId>,
    pub drop: f64,
    /// State of the mask generator (xorshift64*: the same masks on every backend).
    seed: u64,
}

impl<'a> TrainingSimulation<'a> {
    pub fn new(graph: &'a Graph) -> Self {
        Self {
            graph,
            substitutes: HashMap::new(),
            learnable: HashMap::new(),
            prequantized: HashSet::new(),
            drop: 0.0,
            seed: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn next_unit(&mut self) -> f64 {
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        (self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn quantize(
        &mut self,
        site: QuantSite,
        value: Value,
        config: &TensorQuantConfig,
        is_weight: bool,
    ) -> Result<Value> {
        let Value::Tensor(x) = value else { return Ok(value) };
        let learned = self.learnable.get(&site);
        let y = ste_fake_quant(x.clone(), config, learned)?;
        if self.drop <= 0.0 || is_weight || y.kind() != Kind::Float {
            return Ok(Value::Tensor(y));
        }
        // QDrop: each element keeps its float value with probability `drop`.
        let n = y.numel();
        let keep: Vec<bool> = (0..n).map(|_| self.next_unit() < self.drop).collect();
        let shape = y.shape();
        let mask = Tensor::from_bool(&shape, keep, &Device::of(y.dispatch()));
        Ok(Value::Tensor(y.mask_where(&mask, x)))
    }

    fn apply(&mut self, op: &OpInfo<'_>, side: ConfigSide, slots: &mut [Option<Value>]) -> Result<()> {
        let operation = self.graph.operation(op.id)?;
        let Some(cfg) = operation.quant_config.as_ref() else { return Ok(()) };
        let (configs, vars) = match side {
            ConfigSide::Input => (&cfg.input_configs, operation.inputs()),
            ConfigSide::Output => (&cfg.output_configs, operation.outputs()),
        };
        for (slot, value) in slots.iter_mut().enumerate() {
            let Some(config) = configs.get(slot).and_then(|c| c.as_ref()).filter(|c| c.state.is_active()) else {
                continue;
            };
            let var = vars.get(slot).copied().flatten();
            if var.is_some_and(|v| self.prequantized.contains(&v)) {
                continue;
            }
            let is_weight = var.is_some_and(|v| self.graph.variable(v).is_ok_and(|v| v.value.is_some()));
            if let Some(v) = value.take() {
                *value = Some(self.quantize((op.id, side, slot), v, &config.clone(), is_weight)?);
            }
        }
        Ok(())
    }
}

impl ExecHook for TrainingSimulation<'_> {
    fn before_op(&mut self, op: &OpInfo<'_>, inputs: &mut [Option<Value>]) -> Result<()> {
        let operation = self.graph.operation(op.id)?;
        for (slot, var) in operation.inputs().iter().enumerate() {
            if let (Some(var), Some(value)) = (var, inputs.get_mut(slot))
                && let Some(sub) = self.substitutes.get(var)
            {
                *value = Some(sub.clone());
            }
        }
        self.apply(op, ConfigSide::Input, inputs)
    }

    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> Result<()> {
        self.apply(op, ConfigSide::Output, outputs)
    }
}

/// Adam (Kingma & Ba, 2015) over tracked leaves, one learning rate per leaf. The update runs on
/// the device without autodiff, and the leaves come back tracked.
pub struct Adam {
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    steps: i32,
    moments: Vec<Option<(DispatchTensor, DispatchTensor)>>,
}

impl Default for Adam {
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, steps: 0, moments: Vec::new() }
    }
}

impl Adam {
    /// One step: each leaf `params[i]` moves against its gradient at rate `rates[i]` (a leaf
    /// the loss did not reach stays as it is).
    pub fn step(&mut self, params: &mut [&mut DispatchTensor], rates: &[f64], grads: &Gradients) {
        self.steps += 1;
        self.moments.resize(params.len(), None);
        let (b1, b2) = (self.beta1, self.beta2);
        let (c1, c2) = (1.0 - b1.powi(self.steps), 1.0 - b2.powi(self.steps));
        for (i, param) in params.iter_mut().enumerate() {
            let Some(g) = grads.of(param) else { continue };
            let (m, v) = match self.moments[i].take() {
                Some((m, v)) => (m, v),
                None => {
                    let zeros = Dispatch::float_mul_scalar(g.clone(), Scalar::from(0.0));
                    (zeros.clone(), zeros)
                }
            };
            let m = Dispatch::float_add(
                Dispatch::float_mul_scalar(m, Scalar::from(b1)),
                Dispatch::float_mul_scalar(g.clone(), Scalar::from(1.0 - b1)),
            );
            let g2 = Dispatch::float_mul(g.clone(), g);
            let v = Dispatch::float_add(
                Dispatch::float_mul_scalar(v, Scalar::from(b2)),
                Dispatch::float_mul_scalar(g2, Scalar::from(1.0 - b2)),
            );
            let denom = Dispatch::float_add_scalar(
                Dispatch::float_sqrt(Dispatch::float_div_scalar(v.clone(), Scalar::from(c2))),
                Scalar::from(self.epsilon),
            );
            let update = Dispatch::float_div(Dispatch::float_div_scalar(m.clone(), Scalar::from(c1)), denom);
            let rate = rates.get(i).copied().unwrap_or(0.0);
            let inner = <Dispatch as AutodiffBackend>::inner((*param).clone());
            let moved = Dispatch::float_sub(inner, Dispatch::float_mul_scalar(update, Scalar::from(rate)));
            **param = require_grad(<Dispatch as AutodiffBackend>::from_inner(moved));
            self.moments[i] = Some((m, v));
        }
    }
}
