//! Calibration: turns a graph whose operations carry initial quantization configs into one
//! ready for simulation. Parameters are observed directly from their values; activations by
//! running the calibration batches (twice for histogram observers) with an observing hook;
//! biases are then derived (`s_bias = s_in · s_w`). Every step keeps only observer statistics.

use crate::data::CalibrationData;
use crate::error::{QuantError, Result};
use crate::observer::{Collector, HistMode, Observer, ObserverOptions, create_observer};
use mppq_exec::hooks::{Tap, TensorTap};
use mppq_exec::value::{NamedOutputs, float_outputs};
use mppq_exec::{Executor, Value};
use mppq_ir::quant::{
    ConfigLocation, ConfigSide, ObserverKind, QuantizationPolicy, QuantizationState, RoundingPolicy, TensorQuantConfig,
    config_at_mut, sync_dominated,
};
use mppq_ir::{Graph, OpId, op_roles};
use std::collections::HashMap;

/// Calibration knobs.
#[derive(Clone, Debug, Default)]
pub struct CalibrationSetting {
    pub options: ObserverOptions,
    /// Use at most this many batches (all when `None`).
    pub steps: Option<usize>,
}

type Key = (OpId, ConfigSide, usize);

fn config_mut(graph: &mut Graph, (op, side, index): Key) -> Option<&mut TensorQuantConfig> {
    config_at_mut(graph, ConfigLocation { op, side, index })
}

/// Observes activations as the executor runs.
struct ObserveHook {
    observers: HashMap<Key, Box<dyn Observer>>,
    error: Option<QuantError>,
}

impl TensorTap for ObserveHook {
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value) {
        if self.error.is_some() {
            return;
        }
        let (Some(observer), Value::Tensor(t)) = (self.observers.get_mut(&(op, side, slot)), value) else { return };
        if t.kind() != mppq_exec::tensor::Kind::Float {
            return;
        }
        // CPU float32 activations are read in place (a copy per tap cost as much as the observer).
        if let Err(e) = observer.observe(&mppq_exec::cpu::f32_values_or_copy(t), &t.shape()) {
            self.error = Some(e);
        }
    }
}

/// Every config slot of the graph, with its variable name and whether it reads a parameter.
fn slots(graph: &Graph) -> Vec<(Key, String, Option<mppq_ir::TensorData>)> {
    let mut out = Vec::new();
    for (id, op) in graph.operations() {
        let Some(cfg) = &op.quant_config else { continue };
        for (side, configs, vars) in [
            (ConfigSide::Input, &cfg.input_configs, op.inputs()),
            (ConfigSide::Output, &cfg.output_configs, op.outputs()),
        ] {
            for (i, c) in configs.iter().enumerate() {
                let (Some(_), Some(Some(var))) = (c, vars.get(i)) else { continue };
                let v = graph.variable(*var).ok();
                let name = v.map(|v| v.name.clone()).unwrap_or_default();
                out.push(((id, side, i), name, v.and_then(|v| v.value.clone())));
            }
        }
    }
    out
}

/// Calibrates every `Initial` config of `graph`: parameters from their values, activations by
/// running `batches` through `exec` (prepared from the same graph), then copies shared
/// parameters into dominated configs and derives biases. Returns how many configs were
/// calibrated. An empty calibration set is an error when activations need it.
pub fn calibrate(
    graph: &mut Graph,
    exec: &Executor,
    batches: &dyn CalibrationData,
    setting: &CalibrationSetting,
    progress: impl FnMut(&str, usize, usize),
) -> Result<usize> {
    let mut calibrated = quantize_parameters(graph, &setting.options)?;
    calibrated += calibrate_activations(graph, exec, batches, setting, progress)?;
    sync_dominated(graph)?;
    calibrated += derive_biases(graph)?;
    Ok(calibrated)
}

/// Whether a config is calibrated by its own observer: `Initial` and not sharing another
/// config's parameters (those get them from [`sync_dominated`]).
fn needs_calibration(config: &TensorQuantConfig) -> bool {
    config.state == QuantizationState::Initial && config.dominated_by.is_none()
}

/// Calibrates every `Initial` config that reads a parameter (weights) from its values.
/// Returns how many.
pub fn quantize_parameters(graph: &mut Graph, options: &ObserverOptions) -> Result<usize> {
    let mut calibrated = 0;
    for (key, name, value) in slots(graph) {
        let Some(t) = value else { continue };
        let Some(config) = config_mut(graph, key) else { continue };
        if !needs_calibration(config) {
            continue;
        }
        if config.block.is_some() {
            crate::blockwise::calibrate(config, &name, &t)?;
            calibrated += 1;
            continue;
        }
        let mut observer = create_observer(config.observer, &name, config, options)?;
        let values = t.to_f32_vec()?;
        for pass in 0..observer.passes() {
            observer.begin_pass(pass)?;
            observer.observe(&values, t.shape())?;
        }
        observer.finalize(config)?;
        if config.pair_limit.is_some() {
            fit_pair_limited_scales(config, &values, t.shape());
        }
        calibrated += 1;
    }
    Ok(calibrated)
}

/// Weights for a target whose x86 kernels may saturate ([`PairLimit`](mppq_ir::quant::PairLimit)):
/// - when the limit allows it (`unsigned_when_over`, target `any`) and some pair of the
///   rounded codes exceeds it, the weight becomes uint8 with zero point 128: the same codes as
///   unlimited int8, which ORT multiplies in its u8×u8 kernels, exact on every CPU (slower than
///   u8×s8 on VNNI CPUs). A weight none of whose pairs exceeds stays int8, as it is. So the
///   simulation is the unlimited int8 one exactly. (Keeping int8 with the limit where it cost less
///   than 1 dB of weight noise lost 5.1 dB on PP-OCRv4 det's output, 0.16 dB on detect_branch.)
/// - otherwise (`x86-avx2`) the scales that lose least once settled
///   ([`PairLimit::fit_scales`](mppq_ir::quant::PairLimit::fit_scales)).
///
/// The fit is the costliest part of calibrating parameters (ResNet-18: ~1 s) and the guard
/// recalibrates the same weights once per candidate, so fits are remembered by their inputs (the
/// last [`FITS_KEPT`]).
fn fit_pair_limited_scales(config: &mut TensorQuantConfig, values: &[f32], shape: &[usize]) {
    use std::hash::{Hash, Hasher};
    static FITS: std::sync::Mutex<Option<HashMap<u64, Vec<f32>>>> = std::sync::Mutex::new(None);
    let Some(limit) = config.pair_limit.clone() else { return };
    let (range, axis) = ((config.quant_min, config.quant_max), config.channel_axis);
    let round = |v: f32| match config.rounding {
        // Ties to even by the magic number (`rintf` is a library call on baseline x86-64); exact
        // for |v| ≤ 2²², and the clamp to the code range follows anyway.
        RoundingPolicy::HalfEven => {
            const MAGIC: f32 = 12_582_912.0;
            (v.clamp(-4_194_304.0, 4_194_304.0) + MAGIC) - MAGIC
        }
        other => other.round(f64::from(v)) as f32,
    };
    if limit.unsigned_when_over {
        let codes = mppq_ir::quant::pair_limit::channel_codes(values, shape, axis, &config.scale, range, round);
        if codes.is_some_and(|codes| limit.violations(&codes, shape) > 0) {
            // q + 128 in [0, 255]: the int8 codes [-128, 127] shifted, the same values.
            config.quant_min += 128;
            config.quant_max += 128;
            config.offset = vec![128.0; config.scale.len()];
            config.policy = QuantizationPolicy::linear(false, axis.is_some());
            config.pair_limit = None;
        }
        return;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&limit, shape, axis, range, config.rounding).hash(&mut h);
    config.scale.iter().chain(values).for_each(|v| v.to_bits().hash(&mut h));
    let key = h.finish();
    if let Some(scales) = FITS.lock().ok().and_then(|m| m.as_ref()?.get(&key).cloned()) {
        config.scale = scales;
        return;
    }
    limit.fit_scales(values, shape, axis, &mut config.scale, range, round);
    if let Ok(mut fits) = FITS.lock() {
        let fits = fits.get_or_insert_with(Default::default);
        if fits.len() >= FITS_KEPT {
            fits.clear();
        }
        fits.insert(key, config.scale.clone());
    }
}

/// How many pair-limited fits [`fit_pair_limited_scales`] remembers (one per weight; a model's
/// worth, then it starts over).
const FITS_KEPT: usize = 4096;

/// Calibrates every `Initial` activation config by running `batches` (at most
/// `setting.steps`) through `exec` with an observing hook, as many times as the observers
/// need passes. `progress(task, done, total)` is called after each batch. Returns how many.
pub fn calibrate_activations(
    graph: &mut Graph,
    exec: &Executor,
    batches: &dyn CalibrationData,
    setting: &CalibrationSetting,
    progress: impl FnMut(&str, usize, usize),
) -> Result<usize> {
    calibrate_activations_cached(graph, exec, batches, setting, &mut ObservationCache::default(), progress)
}

/// Statistics of earlier calibration runs on the same float graph and data, so that a run which
/// only changes observers (`range_search`'s candidates) does not run the model again: histogram
/// observers of one histogram mode and size share a collection, and min/max reads its pass 0.
/// Entries belong to one [`Graph::float_fingerprint`] and batch count; the last
/// [`ObservationCache::GRAPHS`] graphs are kept (a rejected transform's graph is followed by the
/// accepted one again). Memory: one histogram per activation config and graph.
///
/// The first pass over the data is a float run of the graph, so the cache also keeps each
/// batch's graph outputs (up to [`ObservationCache::OUTPUT_BYTES`]): the guard's float reference
/// on the same graph reads them instead of running the model once more per batch.
#[derive(Debug, Default)]
pub struct ObservationCache {
    /// Fill histograms for one-pass (min/max) configs too, at the cost of a second pass,
    /// because histogram observers will follow on the same graph.
    pub prefetch_histograms: bool,
    /// Per (fingerprint, batches), oldest first: the collections by variable name.
    graphs: Vec<((u64, usize), Collections)>,
    /// Per fingerprint, the float outputs of batches 0, 1, … (the latest graph's only).
    outputs: Option<(u64, Vec<NamedOutputs>)>,
    /// Observers served from the cache, and observers that ran over the data, so far.
    pub served: usize,
    pub observed: usize,
}

impl ObservationCache {
    /// How many graphs' collections are kept.
    pub const GRAPHS: usize = 4;
    /// The most bytes of graph outputs kept.
    pub const OUTPUT_BYTES: usize = 256 << 20;

    /// The float outputs of batch `batch` of the graph with this [`Graph::float_fingerprint`],
    /// when a calibration run kept them.
    pub fn float_outputs(&self, fingerprint: u64, batch: usize) -> Option<&NamedOutputs> {
        self.outputs.as_ref().filter(|(f, _)| *f == fingerprint).and_then(|(_, kept)| kept.get(batch))
    }

    /// Keeps batch `batch`'s outputs if the batches before it are kept and the bound allows.
    fn keep_outputs(&mut self, fingerprint: u64, batch: usize, outputs: Vec<(String, Value)>) {
        if batch == 0 || self.outputs.as_ref().is_some_and(|(f, _)| *f != fingerprint) {
            self.outputs = Some((fingerprint, Vec::new()));
        }
        let Some((_, kept)) = self.outputs.as_mut().filter(|(_, kept)| kept.len() == batch) else { return };
        let bytes = |o: &NamedOutputs| o.iter().map(|(_, v)| v.len() * 4).sum::<usize>();
        let outputs = float_outputs(outputs);
        if kept.iter().map(bytes).sum::<usize>() + bytes(&outputs) <= Self::OUTPUT_BYTES {
            kept.push(outputs);
        }
    }

    /// Makes the entry of `graph` and `batches` the current (last) one; returns the graph's
    /// fingerprint.
    fn prepare(&mut self, graph: &Graph, batches: usize) -> u64 {
        let key = (graph.float_fingerprint(), batches);
        let entry = match self.graphs.iter().position(|(k, _)| *k == key) {
            Some(at) => self.graphs.remove(at),
            None => (key, HashMap::new()),
        };
        if self.graphs.len() >= Self::GRAPHS {
            self.graphs.remove(0);
        }
        self.graphs.push(entry);
        key.0
    }

    fn current(&mut self) -> Option<&mut Collections> {
        self.graphs.last_mut().map(|(_, by_variable)| by_variable)
    }

    fn serve(&mut self, variable: &str, observer: &mut dyn Observer) -> bool {
        let list = self.current().and_then(|m| m.get(variable));
        list.is_some_and(|list| list.iter().any(|c| observer.adopt(c)))
    }

    fn store(&mut self, variable: &str, collected: &Collector) {
        let Some(by_variable) = self.current() else { return };
        let list = by_variable.entry(variable.to_string()).or_default();
        if !list.iter().any(|c| c.collects_like(collected)) {
            list.push(collected.clone());
        }
    }
}

/// Histogram collections by variable name.
type Collections = HashMap<String, Vec<Collector>>;

/// A min/max observer that also fills a histogram for the [`ObservationCache`] in a second pass
/// ([`ObservationCache::prefetch_histograms`]). Pass 0 is the collector's alone (its ranges are
/// min/max's, adopted when pass 1 begins); a tensor whose histogram cannot be built (nothing
/// observed) only loses the cache entry: min/max decides as always.
#[derive(Debug)]
struct WithHistogram {
    minmax: Box<dyn Observer>,
    collector: Collector,
    pass: usize,
    complete: bool,
}

impl Observer for WithHistogram {
    fn name(&self) -> &'static str {
        self.minmax.name()
    }
    fn variable(&self) -> &str {
        self.minmax.variable()
    }
    fn passes(&self) -> usize {
        2
    }
    fn begin_pass(&mut self, pass: usize) -> Result<()> {
        self.pass = pass;
        if pass == 0 {
            self.minmax.begin_pass(0)?;
            self.collector.begin_pass(0)?;
        } else {
            self.minmax.adopt(&self.collector);
            self.complete = self.collector.begin_pass(pass).is_ok();
        }
        Ok(())
    }
    fn observe(&mut self, values: &[f32], shape: &[usize]) -> Result<()> {
        if self.pass == 0 || self.complete { self.collector.observe(values, shape) } else { Ok(()) }
    }
    fn finalize(&self, config: &mut TensorQuantConfig) -> Result<()> {
        self.minmax.finalize(config)
    }
    fn statistics_len(&self) -> usize {
        self.minmax.statistics_len() + self.collector.statistics_len()
    }
    fn collected(&self) -> Option<&Collector> {
        Some(&self.collector).filter(|c| self.complete && c.is_complete())
    }
}

/// [`calibrate_activations`], serving observers from `cache` where it holds their statistics
/// and adding what this run collects to it. The model runs only for the observers it could not
/// serve (not at all when it served every one).
pub fn calibrate_activations_cached(
    graph: &mut Graph,
    exec: &Executor,
    batches: &dyn CalibrationData,
    setting: &CalibrationSetting,
    cache: &mut ObservationCache,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<usize> {
    let count = setting.steps.map_or(batches.batch_count(), |s| s.min(batches.batch_count()));
    let fingerprint = cache.prepare(graph, count);
    let mut served: Vec<(Key, Box<dyn Observer>)> = Vec::new();
    let mut activations: HashMap<Key, Box<dyn Observer>> = HashMap::new();
    for (key, name, value) in slots(graph) {
        if value.is_some() {
            continue;
        }
        let Some(config) = config_mut(graph, key) else { continue };
        if !needs_calibration(config) {
            continue;
        }
        let mut observer = create_observer(config.observer, &name, config, &setting.options)?;
        if cache.serve(&name, observer.as_mut()) {
            served.push((key, observer));
            continue;
        }
        if cache.prefetch_histograms && config.observer == ObserverKind::Minmax && !config.policy.is_floating() {
            let collector =
                Collector::new(&name, "minmax", config.channel_axis, HistMode::Signed, setting.options.bins);
            observer = Box::new(WithHistogram { minmax: observer, collector, pass: 0, complete: false });
        }
        activations.insert(key, observer);
    }
    cache.served += served.len();
    cache.observed += activations.len();
    if served.is_empty() && activations.is_empty() {
        return Ok(0);
    }
    if count == 0 {
        return Err(QuantError::EmptyCalibration);
    }
    let mut observers = served;
    if !activations.is_empty() {
        let passes = activations.values().map(|o| o.passes()).max().unwrap_or(1);
        let mut hook = Tap(ObserveHook { observers: activations, error: None });
        for pass in 0..passes {
            for o in hook.0.observers.values_mut() {
                if pass < o.passes() {
                    o.begin_pass(pass)?;
                }
            }
            let task = format!("calibration pass {}/{passes}", pass + 1);
            for i in 0..count {
                let batch =
                    batches.batch(i, exec.device()).map_err(|message| QuantError::Batch { batch: i, message })?;
                let outputs = exec
                    .run(batch, &mut [&mut hook])
                    .map_err(|e| QuantError::Batch { batch: i, message: format!("the model failed: {e}") })?;
                if let Some(e) = hook.0.error.take() {
                    return Err(e);
                }
                if pass == 0 {
                    cache.keep_outputs(fingerprint, i, outputs);
                }
                progress(&task, i + 1, count);
            }
        }
        for (key, observer) in hook.0.observers {
            if let Some(collected) = observer.collected() {
                cache.store(observer.variable(), collected);
            }
            observers.push((key, observer));
        }
    }
    let mut calibrated = 0;
    for (key, observer) in observers {
        if let Some(config) = config_mut(graph, key) {
            observer.finalize(config)?;
            calibrated += 1;
        }
    }
    Ok(calibrated)
}

/// Sets every `PassiveInit` bias config (the bias slot of the operator-role table: Conv's,
/// ConvTranspose's and Gemm's input 2) to
/// `s_in · s_w[c]` with zero offset, where `s_in` is the *effective* input scale (the
/// dominator's, after [`sync_dominated`]). A bias whose input or weight has no scale (not
/// quantized) is left in float (`Fp32`). Returns how many biases were derived.
/// [`derive_biases`] again for biases already derived (state `Passive`), after input or weight
/// scales changed (the training passes learn them): every bias scale is `s_in · s_w` anew.
pub fn rederive_biases(graph: &mut Graph) -> Result<usize> {
    let ids: Vec<OpId> = graph.operations().map(|(id, _)| id).collect();
    for id in ids {
        let Some(slot) = op_roles(graph.operation(id)?).bias() else { continue };
        if let Some(c) =
            config_mut(graph, (id, ConfigSide::Input, slot)).filter(|c| c.state == QuantizationState::Passive)
        {
            c.state = QuantizationState::PassiveInit;
        }
    }
    derive_biases(graph)
}

pub fn derive_biases(graph: &mut Graph) -> Result<usize> {
    sync_dominated(graph)?;
    let ids: Vec<OpId> = graph.operations().map(|(id, _)| id).collect();
    let mut n = 0;
    for id in ids {
        let op = graph.operation(id)?;
        let Some(cfg) = &op.quant_config else { continue };
        let roles = op_roles(op);
        let (Some(bias_slot), Some(data_slot), Some((weight_slot, ..))) =
            (roles.bias(), roles.first_data(), roles.weight())
        else {
            continue;
        };
        let Some(Some(bias)) = cfg.input_configs.get(bias_slot) else { continue };
        if bias.state != QuantizationState::PassiveInit {
            continue;
        }
        let scale_of = |i: usize| {
            cfg.input_configs.get(i).and_then(|c| c.as_ref()).map(|c| c.scale.clone()).filter(|s| !s.is_empty())
        };
        let (input_scale, weight_scales) = (scale_of(data_slot), scale_of(weight_slot));
        let channels = op
            .inputs()
            .get(bias_slot)
            .copied()
            .flatten()
            .and_then(|v| graph.variable(v).ok()?.value.as_ref().map(|t| t.len()));
        let Some(config) = config_mut(graph, (id, ConfigSide::Input, bias_slot)) else { continue };
        let (Some(s_in), Some(s_w), Some(channels)) = (input_scale, weight_scales, channels) else {
            config.state = QuantizationState::Fp32;
            continue;
        };
        if s_in.len() != 1 || (s_w.len() != 1 && s_w.len() != channels) {
            config.state = QuantizationState::Fp32;
            continue;
        }
        let scale: Vec<f32> = if config.channel_axis.is_none() && s_w.len() == 1 {
            vec![s_in[0] * s_w[0]]
        } else {
            (0..channels).map(|c| s_in[0] * if s_w.len() == 1 { s_w[0] } else { s_w[c] }).collect()
        };
        config.offset = vec![0.0; scale.len()];
        config.scale = scale;
        config.state = QuantizationState::Passive;
        n += 1;
    }
    Ok(n)
}
