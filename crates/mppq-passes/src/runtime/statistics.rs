//! Statistics a pass declares and gets from one run over the calibration data: per-tensor
//! ranges, per-channel ranges and means of any variable, on the float graph or on the simulated
//! (fake-quantized) one. [`collect_statistics`] runs the batches once per graph mode asked for,
//! however many variables and statistics are requested, and keeps only the running sums.
//!
//! A variable is observed where its producer writes it (after the producer's output
//! quantization in simulated mode); a graph input or initializer where its first consumer reads it.

use crate::error::{InPass, PassError, Result};
use crate::runtime::compare::tap_of;
use crate::runtime::pass::PassContext;
use mppq_exec::hooks::{Tap, TensorTap};
use mppq_exec::{BurnFakeQuant, QuantSimulation, SimulationMemo, Value};
use mppq_ir::quant::ConfigSide;
use mppq_ir::{Graph, OpId, VarId};
use std::collections::HashMap;

/// Which graph a statistic is taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GraphMode {
    /// The float model.
    Float,
    /// The model with every active quantization config simulated.
    Simulated,
}

/// What to measure of a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Statistic {
    /// The smallest and largest value.
    Range,
    /// The smallest and largest value of each channel along `axis`.
    ChannelRange { axis: usize },
    /// The mean of each channel along `axis`.
    ChannelMean { axis: usize },
    /// The smallest and largest value of each channel along the last axis (features of a
    /// `[…, K]` activation, whatever its rank).
    LastAxisRange,
}

/// One statistic of one variable on one graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatRequest {
    pub var: VarId,
    pub statistic: Statistic,
    pub mode: GraphMode,
}

impl StatRequest {
    pub fn new(var: VarId, statistic: Statistic, mode: GraphMode) -> Self {
        Self { var, statistic, mode }
    }
}

/// A measured statistic.
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    Range {
        min: f32,
        max: f32,
    },
    /// One `(min, max)` per channel.
    ChannelRanges(Vec<(f32, f32)>),
    /// One mean per channel.
    ChannelMeans(Vec<f32>),
}

/// The collected statistics, by request.
#[derive(Clone, Debug, Default)]
pub struct Statistics {
    values: HashMap<StatRequest, StatValue>,
    /// How many batches each graph mode ran (one run per mode).
    pub batches_run: HashMap<GraphMode, usize>,
}

impl Statistics {
    pub fn get(&self, request: &StatRequest) -> Option<&StatValue> {
        self.values.get(request)
    }

    /// `(min, max)` of `var` on `mode`'s graph, if requested and observed.
    pub fn range(&self, var: VarId, mode: GraphMode) -> Option<(f32, f32)> {
        match self.get(&StatRequest::new(var, Statistic::Range, mode))? {
            StatValue::Range { min, max } => Some((*min, *max)),
            _ => None,
        }
    }

    /// Per-channel means of `var` along `axis`, if requested and observed.
    pub fn channel_means(&self, var: VarId, axis: usize, mode: GraphMode) -> Option<&[f32]> {
        match self.get(&StatRequest::new(var, Statistic::ChannelMean { axis }, mode))? {
            StatValue::ChannelMeans(m) => Some(m),
            _ => None,
        }
    }

    /// Per-channel `(min, max)` of `var` along its last axis, if requested and observed.
    pub fn last_axis_ranges(&self, var: VarId, mode: GraphMode) -> Option<&[(f32, f32)]> {
        match self.get(&StatRequest::new(var, Statistic::LastAxisRange, mode))? {
            StatValue::ChannelRanges(r) => Some(r),
            _ => None,
        }
    }

    /// Per-channel `(min, max)` of `var` along `axis`, if requested and observed.
    pub fn channel_ranges(&self, var: VarId, axis: usize, mode: GraphMode) -> Option<&[(f32, f32)]> {
        match self.get(&StatRequest::new(var, Statistic::ChannelRange { axis }, mode))? {
            StatValue::ChannelRanges(r) => Some(r),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Running sums of one request.
#[derive(Clone, Debug)]
enum Accumulator {
    Range {
        min: f32,
        max: f32,
    },
    /// `axis: None`: the last axis of each tensor.
    ChannelRanges {
        axis: Option<usize>,
        ranges: Vec<(f32, f32)>,
    },
    ChannelMeans {
        axis: usize,
        sums: Vec<f64>,
        count: u64,
    },
}

impl Accumulator {
    fn new(statistic: Statistic) -> Self {
        match statistic {
            Statistic::Range => Self::Range { min: f32::INFINITY, max: f32::NEG_INFINITY },
            Statistic::ChannelRange { axis } => Self::ChannelRanges { axis: Some(axis), ranges: Vec::new() },
            Statistic::LastAxisRange => Self::ChannelRanges { axis: None, ranges: Vec::new() },
            Statistic::ChannelMean { axis } => Self::ChannelMeans { axis, sums: Vec::new(), count: 0 },
        }
    }

    /// Adds one observed tensor; `Err` says what does not fit (a channel axis past the rank, a
    /// channel count that changed between batches).
    fn observe(&mut self, values: &[f32], shape: &[usize]) -> std::result::Result<(), String> {
        let channels_of = |axis: usize| -> std::result::Result<(usize, usize), String> {
            let channels = *shape.get(axis).ok_or_else(|| format!("axis {axis} is past the rank of {shape:?}"))?;
            Ok((channels, shape[axis + 1..].iter().product()))
        };
        match self {
            Self::Range { min, max } => {
                for v in values {
                    *min = min.min(*v);
                    *max = max.max(*v);
                }
            }
            Self::ChannelRanges { axis, ranges } => {
                let (channels, inner) = channels_of(axis.unwrap_or(shape.len().saturating_sub(1)))?;
                if ranges.is_empty() {
                    *ranges = vec![(f32::INFINITY, f32::NEG_INFINITY); channels];
                }
                if ranges.len() != channels {
                    return Err(format!("{} channels before, {channels} now", ranges.len()));
                }
                for (i, v) in values.iter().enumerate() {
                    let r = &mut ranges[(i / inner.max(1)) % channels];
                    *r = (r.0.min(*v), r.1.max(*v));
                }
            }
            Self::ChannelMeans { axis, sums, count } => {
                let (channels, inner) = channels_of(*axis)?;
                if sums.is_empty() {
                    *sums = vec![0.0; channels];
                }
                if sums.len() != channels {
                    return Err(format!("{} channels before, {channels} now", sums.len()));
                }
                for (i, v) in values.iter().enumerate() {
                    sums[(i / inner.max(1)) % channels] += f64::from(*v);
                }
                *count += (values.len() / channels.max(1)) as u64;
            }
        }
        Ok(())
    }

    fn finish(self) -> StatValue {
        match self {
            Self::Range { min, max } => StatValue::Range { min, max },
            Self::ChannelRanges { ranges, .. } => StatValue::ChannelRanges(ranges),
            Self::ChannelMeans { sums, count, .. } => {
                StatValue::ChannelMeans(sums.iter().map(|s| (s / count.max(1) as f64) as f32).collect())
            }
        }
    }
}

/// Observes the requested variables as the executor runs.
struct StatHook<'g> {
    graph: &'g Graph,
    /// Where each variable is observed: (op, side, slot) → accumulators (by request index).
    taps: HashMap<(OpId, ConfigSide, usize), Vec<usize>>,
    accumulators: Vec<(StatRequest, Accumulator)>,
    error: Option<String>,
}

impl TensorTap for StatHook<'_> {
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value) {
        let (Some(indices), Value::Tensor(t)) = (self.taps.get(&(op, side, slot)), value) else { return };
        if self.error.is_some() || t.kind() != mppq_exec::tensor::Kind::Float {
            return;
        }
        let (values, shape) = (mppq_exec::cpu::f32_values_or_copy(t), t.shape());
        for i in indices {
            let (request, acc) = &mut self.accumulators[*i];
            if let Err(e) = acc.observe(&values, &shape) {
                self.error = Some(format!("variable `{}`: {e}", self.graph.var_name(request.var)));
            }
        }
    }
}

/// Collects `requests` over every calibration batch: one run per graph mode. `pass` names the
/// caller in errors and progress. A variable no operation reads or writes is an error.
pub fn collect_statistics(
    ctx: &mut PassContext<'_>,
    pass: &'static str,
    requests: &[StatRequest],
) -> Result<Statistics> {
    let mut out = Statistics::default();
    let mut modes: Vec<GraphMode> = requests.iter().map(|r| r.mode).collect();
    modes.sort();
    modes.dedup();
    let batches = ctx.data.batch_count();
    for mode in modes {
        let exec = ctx.executor(pass)?;
        let graph: &Graph = ctx.graph;
        let mut hook = Tap(StatHook { graph, taps: HashMap::new(), accumulators: Vec::new(), error: None });
        for request in requests.iter().filter(|r| r.mode == mode) {
            if hook.0.accumulators.iter().any(|(r, _)| r == request) {
                continue;
            }
            let tap = tap_of(graph, request.var).ok_or_else(|| PassError::Invalid {
                pass,
                message: format!("statistics of `{}`: no operation reads or writes it", graph.var_name(request.var)),
            })?;
            hook.0.taps.entry(tap).or_default().push(hook.0.accumulators.len());
            hook.0.accumulators.push((*request, Accumulator::new(request.statistic)));
        }
        ctx.progress.begin(&format!("{pass}: statistics ({mode:?} graph)"), batches as u64);
        let memo = SimulationMemo::new();
        for i in 0..batches {
            let feeds = ctx.batch(i, pass)?;
            match mode {
                GraphMode::Float => exec.run(feeds, &mut [&mut hook]),
                GraphMode::Simulated => {
                    let mut sim = QuantSimulation::new(graph, BurnFakeQuant).with_memo(&memo);
                    exec.run(feeds, &mut [&mut sim, &mut hook])
                }
            }
            .in_pass(pass)?;
            if let Some(message) = hook.0.error.take() {
                return Err(PassError::Invalid { pass, message });
            }
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        out.batches_run.insert(mode, batches);
        out.values.extend(hook.0.accumulators.into_iter().map(|(r, a)| (r, a.finish())));
    }
    Ok(out)
}
