//! The comparison engine: the simulated graph against a float reference, batch by batch. One
//! place taps the compared values during the runs ([`Comparison`]): per batch, a reference run
//! keeps each target's float value where it is computed (sharing the run's buffers, no copy), then
//! the simulated run hands each target's value, as soon as it is computed, with the kept one to a
//! [`PairSink`], which accumulates what its reader needs, and the kept value is dropped. Across
//! batches only the sinks' sums survive.
//!
//! Two sinks read it: [`compare_to_reference`] here (for each chosen variable, the mean and mean
//! square of the error (simulated − reference) per channel, and the mean square of the
//! reference: bias correction reads the per-channel mean error, SSD equalization the mean square
//! error), and the analysis report of `mppq-api` (per tensor [`Moments`](mppq_quant::metrics::Moments)
//! and a sample for histograms).
//!
//! [`compare_to_reference`]'s reference is a graph of its own (usually a copy of the float graph
//! taken before the pass changed anything): variables are matched by name, so both graphs must
//! name them alike.

use crate::error::{InPass, PassError, Result};
use crate::runtime::pass::PassContext;
use mppq_exec::hooks::{Tap, TensorTap};
use mppq_exec::tensor::Kind;
use mppq_exec::{BurnFakeQuant, Executor, QuantSimulation, SimulationMemo, Tensor, Value};
use mppq_ir::quant::ConfigSide;
use mppq_ir::{Graph, OpId, VarId};
use std::collections::HashMap;
use std::convert::Infallible;

/// One variable to compare, by name, with an optional channel axis (`None`: one channel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareTarget {
    pub name: String,
    pub channel_axis: Option<usize>,
}

impl CompareTarget {
    /// The value the readers of `name` see, all channels together.
    pub fn seen(name: &str) -> Self {
        Self { name: name.to_string(), channel_axis: None }
    }
}

/// The error of one variable, per channel, over the compared batches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorStats {
    /// Mean of (simulated − reference), per channel.
    pub mean_error: Vec<f64>,
    /// Mean of (simulated − reference)², per channel.
    pub mean_square_error: Vec<f64>,
    /// Mean of reference², per channel.
    pub mean_square_signal: Vec<f64>,
}

impl ErrorStats {
    /// Noise power over signal power, all channels together (0 for an exact match; a silent
    /// reference counts its noise against a signal of 1e-12, as the guard's outputs do).
    pub fn noise_to_signal(&self) -> f64 {
        let noise: f64 = self.mean_square_error.iter().sum();
        let signal: f64 = self.mean_square_signal.iter().sum();
        mppq_quant::metrics::noise_to_signal(noise, signal, 1e-12)
    }

    /// The error of all channels together.
    pub fn mean_square_error_total(&self) -> f64 {
        self.mean_square_error.iter().sum::<f64>() / self.mean_square_error.len().max(1) as f64
    }
}

pub use mppq_exec::value::{NamedOutputs, float_outputs};

/// Where a run shows a compared value: an operation's input or output slot.
pub type TapPoint = (OpId, ConfigSide, usize);

/// The compared values (targets, by index) and where a run shows each.
#[derive(Clone, Debug, Default)]
pub struct TapPoints {
    at: HashMap<TapPoint, Vec<usize>>,
    targets: usize,
}

impl TapPoints {
    /// Target `index` is seen at `point` (several targets may share one point).
    pub fn add(&mut self, point: TapPoint, index: usize) {
        self.at.entry(point).or_default().push(index);
        self.targets = self.targets.max(index + 1);
    }

    /// How many targets (one more than the highest index added).
    pub fn targets(&self) -> usize {
        self.targets
    }

    fn at(&self, op: OpId, side: ConfigSide, slot: usize) -> Option<&Vec<usize>> {
        self.at.get(&(op, side, slot))
    }
}

/// What a comparison does with the values of one target: called by the simulated run as soon as
/// it computes the target, with the value the reference run kept (`None`: it kept none).
pub trait PairSink {
    type Error;
    fn pair(
        &mut self,
        index: usize,
        reference: Option<Tensor>,
        simulated: &Tensor,
    ) -> std::result::Result<(), Self::Error>;
}

/// A reference run's tap: keeps the targets' values that `wanted` accepts.
struct Keep<'a> {
    points: &'a TapPoints,
    wanted: fn(&Tensor) -> bool,
    kept: Vec<Option<Tensor>>,
}

impl TensorTap for Keep<'_> {
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value) {
        let (Some(indices), Value::Tensor(t)) = (self.points.at(op, side, slot), value) else { return };
        if !(self.wanted)(t) {
            return;
        }
        for i in indices {
            self.kept[*i] = Some(t.clone());
        }
    }
}

/// The simulated run's tap: hands each target's value with the kept one to the sink, until the
/// sink fails.
struct Meet<'a, S: PairSink> {
    points: &'a TapPoints,
    kept: Vec<Option<Tensor>>,
    sink: &'a mut S,
    error: Option<S::Error>,
}

impl<S: PairSink> TensorTap for Meet<'_, S> {
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value) {
        if self.error.is_some() {
            return;
        }
        let (Some(indices), Value::Tensor(t)) = (self.points.at(op, side, slot), value) else { return };
        for i in indices {
            if let Err(e) = self.sink.pair(*i, self.kept[*i].take(), t) {
                self.error = Some(e);
                break;
            }
        }
    }
}

/// The values a reference run kept for the targets, by index.
pub type Kept = Vec<Option<Tensor>>;

/// The simulated side of a comparison: `graph` run by `exec` under the quantization simulation,
/// its targets at `points`; one simulation memo serves every batch.
pub struct Comparison<'a> {
    graph: &'a Graph,
    exec: &'a Executor,
    points: TapPoints,
    memo: SimulationMemo,
}

impl<'a> Comparison<'a> {
    pub fn new(graph: &'a Graph, exec: &'a Executor, points: TapPoints) -> Self {
        Self { graph, exec, points, memo: SimulationMemo::new() }
    }

    pub fn points(&self) -> &TapPoints {
        &self.points
    }

    /// Runs `reference` (a float executor) on `feeds`, keeping the value of each target at its
    /// `points` that `wanted` accepts; returns them and the run's outputs.
    pub fn keep(
        reference: &Executor,
        points: &TapPoints,
        feeds: Vec<(String, Value)>,
        wanted: fn(&Tensor) -> bool,
    ) -> mppq_exec::Result<(Kept, Vec<(String, Value)>)> {
        let mut keep = Tap(Keep { points, wanted, kept: vec![None; points.targets()] });
        let outputs = reference.run(feeds, &mut [&mut keep])?;
        Ok((keep.0.kept, outputs))
    }

    /// Runs the simulated graph on `feeds` and hands each target's value to `sink` with its value
    /// in `kept`, as the run computes it (the simulation's hook first: the sink sees the value as
    /// the simulation quantized it). Stops handing values at the sink's first error, which comes
    /// back inside; else the kept values no simulated value met.
    pub fn simulate<S: PairSink>(
        &self,
        feeds: Vec<(String, Value)>,
        kept: Kept,
        sink: &mut S,
    ) -> mppq_exec::Result<std::result::Result<Kept, S::Error>> {
        let mut sim = QuantSimulation::new(self.graph, BurnFakeQuant).with_memo(&self.memo);
        let mut meet = Tap(Meet { points: &self.points, kept, sink, error: None });
        self.exec.run(feeds, &mut [&mut sim, &mut meet])?;
        Ok(match meet.0.error {
            Some(e) => Err(e),
            None => Ok(meet.0.kept),
        })
    }
}

/// Running sums of one target.
#[derive(Clone, Debug, Default)]
struct Sums {
    error: Vec<f64>,
    square_error: Vec<f64>,
    square_signal: Vec<f64>,
    count: Vec<u64>,
}

/// Where `var` is seen: where its producer writes it, else where its first consumer reads it.
pub(crate) fn tap_of(graph: &Graph, var: VarId) -> Option<(OpId, ConfigSide, usize)> {
    if let Some(p) = graph.producer(var) {
        let slot = graph.operation(p).ok()?.outputs().iter().position(|o| *o == Some(var))?;
        return Some((p, ConfigSide::Output, slot));
    }
    let c = *graph.consumers(var).first()?;
    let slot = graph.operation(c).ok()?.inputs().iter().position(|i| *i == Some(var))?;
    Some((c, ConfigSide::Input, slot))
}

fn points_for(graph: &Graph, targets: &[CompareTarget], pass: &'static str) -> Result<TapPoints> {
    let mut points = TapPoints::default();
    for (i, t) in targets.iter().enumerate() {
        let var = graph.var_named(&t.name).in_pass(pass)?;
        let tap = tap_of(graph, var).ok_or_else(|| PassError::Invalid {
            pass,
            message: format!("comparing `{}`: no operation reads or writes it", t.name),
        })?;
        points.add(tap, i);
    }
    Ok(points)
}

fn is_float(t: &Tensor) -> bool {
    t.kind() == Kind::Float
}

/// [`compare_to_reference`]'s sink: per-channel error sums of each target. A problem is kept
/// per target and reported after the run, the first target's first.
struct ChannelErrors<'a> {
    targets: &'a [CompareTarget],
    sums: Vec<Sums>,
    problems: Vec<Option<String>>,
}

impl PairSink for ChannelErrors<'_> {
    type Error = Infallible;

    fn pair(&mut self, i: usize, reference: Option<Tensor>, simulated: &Tensor) -> std::result::Result<(), Infallible> {
        let target = &self.targets[i];
        let reference = match (reference, is_float(simulated)) {
            (Some(r), true) => r,
            // Not a float tensor in either graph (an int64 shape output): nothing to compare.
            (None, false) => return Ok(()),
            _ => {
                self.problems[i] = Some(format!("comparing `{}`: computed by one graph only", target.name));
                return Ok(());
            }
        };
        let (shape, sim_shape) = (reference.shape(), simulated.shape());
        if shape != sim_shape {
            self.problems[i] = Some(format!("comparing `{}`: shape {sim_shape:?} against {shape:?}", target.name));
            return Ok(());
        }
        let (reference, simulated) = (reference.to_f32_vec(), simulated.to_f32_vec());
        if let Err(message) = accumulate(&mut self.sums[i], &reference, &simulated, &shape, target.channel_axis) {
            self.problems[i] = Some(format!("comparing `{}`: {message}", target.name));
        }
        Ok(())
    }
}

/// Runs `batches` calibration batches (the first ones) through `reference` in float and through
/// `ctx.graph` under simulation, and returns the error of each target, in `targets` order.
/// A target that is not a float tensor in either run is left empty; one computed by only one of
/// them, or whose shapes differ between them, is an error.
pub fn compare_to_reference(
    ctx: &mut PassContext<'_>,
    pass: &'static str,
    reference: &Graph,
    targets: &[CompareTarget],
    batches: usize,
) -> Result<Vec<ErrorStats>> {
    let reference_exec = Executor::new(reference, ctx.registry, ctx.device, ctx.opsets).in_pass(pass)?;
    let exec = ctx.executor(pass)?;
    let reference_points = points_for(reference, targets, pass)?;
    let comparison = Comparison::new(ctx.graph, &exec, points_for(ctx.graph, targets, pass)?);
    let mut sink =
        ChannelErrors { targets, sums: vec![Sums::default(); targets.len()], problems: vec![None; targets.len()] };
    let batches = batches.min(ctx.data.batch_count());
    ctx.progress.begin(&format!("{pass}: comparing with float"), batches as u64);
    for b in 0..batches {
        let feeds = ctx.batch(b, pass)?;
        let (kept, _) = Comparison::keep(&reference_exec, &reference_points, feeds.clone(), is_float).in_pass(pass)?;
        let Ok(unmet) = comparison.simulate(feeds, kept, &mut sink).in_pass(pass)?;
        for (i, target) in targets.iter().enumerate() {
            if let Some(message) = sink.problems[i].take() {
                return Err(PassError::Invalid { pass, message });
            }
            if unmet[i].is_some() {
                return Err(PassError::Invalid {
                    pass,
                    message: format!("comparing `{}`: computed by one graph only", target.name),
                });
            }
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    Ok(sink.sums.into_iter().map(finish).collect())
}

fn accumulate(
    sums: &mut Sums,
    reference: &[f32],
    simulated: &[f32],
    shape: &[usize],
    axis: Option<usize>,
) -> std::result::Result<(), String> {
    let (channels, inner) = match axis {
        Some(a) => {
            let channels = *shape.get(a).ok_or_else(|| format!("axis {a} is past the rank of {shape:?}"))?;
            (channels, shape[a + 1..].iter().product::<usize>().max(1))
        }
        None => (1, reference.len().max(1)),
    };
    if sums.count.is_empty() {
        *sums = Sums {
            error: vec![0.0; channels],
            square_error: vec![0.0; channels],
            square_signal: vec![0.0; channels],
            count: vec![0; channels],
        };
    }
    if sums.count.len() != channels {
        return Err(format!("{} channels before, {channels} now", sums.count.len()));
    }
    for (i, (r, s)) in reference.iter().zip(simulated).enumerate() {
        let c = (i / inner) % channels;
        let e = f64::from(*s) - f64::from(*r);
        sums.error[c] += e;
        sums.square_error[c] += e * e;
        sums.square_signal[c] += f64::from(*r) * f64::from(*r);
        sums.count[c] += 1;
    }
    Ok(())
}

fn finish(sums: Sums) -> ErrorStats {
    let mean = |v: &[f64]| v.iter().zip(&sums.count).map(|(s, n)| s / (*n).max(1) as f64).collect();
    ErrorStats {
        mean_error: mean(&sums.error),
        mean_square_error: mean(&sums.square_error),
        mean_square_signal: mean(&sums.square_signal),
    }
}
