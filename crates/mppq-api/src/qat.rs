//! Quantization-aware training of an ONNX graph: [`QatModel`] wraps a quantized model as a
//! trainable model on Burn's autodiff, so a user fine-tunes it with their own loss and data loop
//! and exports QDQ afterwards.
//!
//! The parameters are the float weights and biases of the quantized operations and the scales
//! of their quantizers (learnable factors on the calibrated scales, LSQ's gradient). The forward
//! pass is the model's own operator code with every quantizer simulated by straight-through
//! fake quantization ([`mppq_exec::simulation::training`]), so what trains is what exports.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mppq_api::qat::{QatModel, QatOptions};
//! # let (mut quantizer, batches): (mppq_api::ModelQuantizer, Vec<(Vec<(String, mppq_api::exec::Value)>, Vec<i64>)>) = todo!();
//! let mut model = QatModel::new(&quantizer, QatOptions::default())?;
//! for (feeds, labels) in &batches {
//!     let outputs = model.forward(feeds.clone())?;
//!     let loss = mppq_api::qat::cross_entropy(&outputs[0].1, labels)?;
//!     model.step(loss)?;
//! }
//! model.apply(&mut quantizer)?; // weights and scales back into the quantized model
//! quantizer.export_to(std::path::Path::new("out"))?;
//! # Ok(()) }
//! ```

use crate::error::{ApiError, Result};
use crate::quantize::ModelQuantizer;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{IntDType, Scalar, Shape};
use mppq_exec::simulation::training::{Adam, LearnableScale, QuantSite, TrainingSimulation, backward, require_grad};
use mppq_exec::{Device, Executor, Tensor, Value};
use mppq_ir::quant::{ConfigLocation, config_at_mut};
use mppq_ir::{Graph, VarId};
use mppq_passes::training::reconstruction::learnables::{Learnables, Scope};

/// What trains, and how fast (Adam).
#[derive(Clone, Debug, PartialEq)]
pub struct QatOptions {
    /// Train the float weights and biases of quantized operations.
    pub weights: bool,
    /// Train the scales of quantized weights and activations.
    pub scales: bool,
    /// Adam's rate for weights and biases.
    pub weight_rate: f64,
    /// Adam's rate for scale factors (relative change per step).
    pub scale_rate: f64,
}

impl Default for QatOptions {
    fn default() -> Self {
        Self { weights: true, scales: true, weight_rate: 1e-3, scale_rate: 1e-3 }
    }
}

/// A quantized model being fine-tuned.
pub struct QatModel {
    graph: Graph,
    exec: Executor,
    device: Device,
    /// Trainable weights and biases: the variable and its tracked leaf.
    params: Vec<(VarId, DispatchTensor)>,
    /// Learnable scales, one per root config; `sites` maps every active config to its leaf.
    scales: Vec<(ConfigLocation, LearnableScale)>,
    sites: Vec<(QuantSite, usize)>,
    options: QatOptions,
    adam: Adam,
}

fn qat_error(message: String) -> ApiError {
    ApiError::Training(message)
}

impl QatModel {
    /// Wraps `quantizer`'s model (quantized: its configs calibrated) on the autodiff variant of
    /// its device.
    pub fn new(quantizer: &ModelQuantizer, options: QatOptions) -> Result<Self> {
        let graph = quantizer.model.graph.clone();
        let device = quantizer.device().autodiff();
        let imports = quantizer.model.opset_imports.clone();
        let opsets = move |d: &str| mppq_ir::graph::lookup_opset(&imports, d).unwrap_or(0);
        let exec = Executor::new(&graph, quantizer.registry(), &device, &opsets)?;
        let scope = Scope::Graph { weights: options.weights, scales: options.scales };
        let learnables = Learnables::discover(&graph, scope)?;
        let mut params = Vec::new();
        for w in &learnables.weights {
            let Some(value) = graph.variable(w.var)?.value.as_ref() else { continue };
            params.push((w.var, require_grad(Tensor::from_data(value, &device)?.into_dispatch())));
        }
        let mut scales = Vec::new();
        for group in &learnables.scales {
            if let Some(leaf) = group.leaf(&graph, &device) {
                scales.push((group.seed, leaf));
            }
        }
        let sites = learnables.sites(&graph);
        if params.is_empty() && scales.is_empty() {
            return Err(qat_error("nothing to train: the model has no quantized weights or calibrated scales".into()));
        }
        Ok(Self { graph, exec, device, params, scales, sites, options, adam: Adam::default() })
    }

    /// The autodiff device the model trains on: feeds are moved there.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// How many values train: (weight and bias elements, scale factors).
    pub fn parameter_count(&self) -> (usize, usize) {
        let n = |t: &DispatchTensor| Tensor::from_dispatch(t.clone()).numel();
        (self.params.iter().map(|(_, t)| n(t)).sum(), self.scales.iter().map(|(_, s)| s.base.len()).sum())
    }

    /// Runs the quantized model with gradients recorded; returns the graph outputs in order
    /// (tracked: build a loss from them and pass it to [`Self::step`]).
    pub fn forward(&mut self, feeds: Vec<(String, Value)>) -> Result<Vec<(String, Tensor)>> {
        let feeds = feeds
            .into_iter()
            .map(|(name, v)| match v {
                Value::Tensor(t) => Ok((name, Value::Tensor(t.to_device(&self.device)?))),
                other => Ok((name, other)),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut sim = TrainingSimulation::new(&self.graph);
        sim.substitutes =
            self.params.iter().map(|(v, t)| (*v, Value::Tensor(Tensor::from_dispatch(t.clone())))).collect();
        sim.learnable = self.sites.iter().map(|(site, i)| (*site, self.scales[*i].1.clone())).collect();
        let outputs = self.exec.run(feeds, &mut [&mut sim])?;
        outputs
            .into_iter()
            .map(|(name, v)| match v {
                Value::Tensor(t) => Ok((name, t)),
                _ => Err(qat_error(format!("output `{name}` is not a tensor"))),
            })
            .collect()
    }

    /// Backpropagates `loss` (a tracked tensor from [`Self::forward`]'s outputs; its elements are
    /// summed) and moves every parameter one Adam step.
    pub fn step(&mut self, loss: Tensor) -> Result<f64> {
        let value = loss.to_f64_vec().iter().sum();
        if !f64::is_finite(value) {
            return Err(qat_error(format!("the loss is {value}; lower the learning rates")));
        }
        let grads = backward(loss.into_dispatch());
        let mut leaves: Vec<&mut DispatchTensor> = Vec::new();
        let mut rates = Vec::new();
        for (_, t) in self.params.iter_mut() {
            leaves.push(t);
            rates.push(self.options.weight_rate);
        }
        for (_, s) in self.scales.iter_mut() {
            leaves.push(&mut s.factor);
            rates.push(self.options.scale_rate);
        }
        self.adam.step(&mut leaves, &rates, &grads);
        Ok(value)
    }

    /// Writes the trained weights, biases and scales into `quantizer`'s model (configs that share
    /// a scale follow it; bias scales are derived again from the new input and weight scales).
    pub fn apply(self, quantizer: &mut ModelQuantizer) -> Result<()> {
        let graph = &mut quantizer.model.graph;
        for (var, leaf) in &self.params {
            let data = Tensor::from_dispatch(Dispatch::float_detach(leaf.clone())).to_data()?;
            let v = graph.variable_mut(*var)?;
            let dtype = v.value.as_ref().map(|d| d.dtype()).unwrap_or(data.dtype());
            v.value = Some(mppq_ir::TensorData::from_f32_as(dtype, data.shape().to_vec(), &data.to_f32_vec()?)?);
        }
        for (loc, scale) in &self.scales {
            if let Some(c) = config_at_mut(graph, *loc) {
                c.scale = scale.values();
            }
        }
        mppq_ir::quant::sync_dominated(graph)?;
        // Bias scales are input scale × weight scale: derived again from the trained ones.
        mppq_quant::calibrate::rederive_biases(graph)?;
        Ok(())
    }
}

/// Mean cross-entropy of `logits` (`[batch, classes]`, tracked) against class `labels`, tracked.
pub fn cross_entropy(logits: &Tensor, labels: &[i64]) -> Result<Tensor> {
    let shape = logits.shape();
    let [batch, classes] = shape[..] else {
        return Err(qat_error(format!("cross_entropy takes [batch, classes] logits, got {shape:?}")));
    };
    if labels.len() != batch || labels.iter().any(|l| *l < 0 || *l as usize >= classes) {
        return Err(qat_error(format!("{} labels in 0..{classes} expected for {batch} rows", batch)));
    }
    let x = logits.dispatch().clone();
    // log-softmax with the row maximum subtracted (no overflow).
    let max = Dispatch::float_detach(Dispatch::float_max_dim(x.clone(), 1));
    let shifted = Dispatch::float_sub(x, max);
    let log_sum = Dispatch::float_log(Dispatch::float_sum_dim(Dispatch::float_exp(shifted.clone()), 1));
    let log_p = Dispatch::float_sub(shifted, log_sum);
    let device = logits.dispatch().device();
    let index = burn::tensor::TensorData::new(labels.to_vec(), Shape::from(vec![batch, 1]));
    let index = Dispatch::int_cast(Dispatch::int_from_data(index, &device), IntDType::I64);
    let picked = Dispatch::float_gather(1, log_p, index);
    let loss = Dispatch::float_div_scalar(Dispatch::float_neg(Dispatch::float_sum(picked)), Scalar::from(batch as f64));
    Ok(Tensor::from_dispatch(loss))
}
