//! Comparison of the simulated graph against a float reference, batch by batch: for each chosen
//! variable, the mean and mean square of the error (simulated − reference) per channel, and the
//! mean square of the reference. Bias correction reads the per-channel mean error; the pipeline's
//! guard reads the graph outputs' signal-to-noise ratio.
//!
//! The reference is a graph of its own (usually a copy of the float graph taken before the pass
//! changed anything): variables are matched by name, so both graphs must name them alike.

use crate::error::{InPass, PassError, Result};
use crate::runtime::pass::PassContext;
use mppq_exec::hooks::{Tap, TensorTap};
use mppq_exec::{BurnFakeQuant, Executor, QuantSimulation, SimulationMemo, Value};
use mppq_ir::quant::ConfigSide;
use mppq_ir::{Graph, OpId, VarId};
use std::collections::HashMap;

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

/// Running sums of one target.
#[derive(Clone, Debug, Default)]
struct Sums {
    error: Vec<f64>,
    square_error: Vec<f64>,
    square_signal: Vec<f64>,
    count: Vec<u64>,
}

/// Captures the values of the targets as one graph runs.
struct Capture {
    taps: HashMap<(OpId, ConfigSide, usize), Vec<usize>>,
    values: Vec<Option<(Vec<f32>, Vec<usize>)>>,
}

impl TensorTap for Capture {
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value) {
        let (Some(indices), Value::Tensor(t)) = (self.taps.get(&(op, side, slot)), value) else { return };
        if t.kind() != mppq_exec::tensor::Kind::Float {
            return;
        }
        for i in indices {
            self.values[*i] = Some((t.to_f32_vec(), t.shape()));
        }
    }
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

fn capture_for(graph: &Graph, targets: &[CompareTarget], pass: &'static str) -> Result<Capture> {
    let mut taps: HashMap<_, Vec<usize>> = HashMap::new();
    for (i, t) in targets.iter().enumerate() {
        let var = graph.var_named(&t.name).in_pass(pass)?;
        let tap = tap_of(graph, var).ok_or_else(|| PassError::Invalid {
            pass,
            message: format!("comparing `{}`: no operation reads or writes it", t.name),
        })?;
        taps.entry(tap).or_default().push(i);
    }
    Ok(Capture { taps, values: vec![None; targets.len()] })
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
    let mut reference_capture = Tap(capture_for(reference, targets, pass)?);
    let mut capture = Tap(capture_for(ctx.graph, targets, pass)?);
    let mut sums = vec![Sums::default(); targets.len()];
    let batches = batches.min(ctx.data.batch_count());
    ctx.progress.begin(&format!("{pass}: comparing with float"), batches as u64);
    let memo = SimulationMemo::new();
    for b in 0..batches {
        let feeds = ctx.batch(b, pass)?;
        reference_capture.0.values.iter_mut().for_each(|v| *v = None);
        capture.0.values.iter_mut().for_each(|v| *v = None);
        reference_exec.run(feeds.clone(), &mut [&mut reference_capture]).in_pass(pass)?;
        let mut sim = QuantSimulation::new(ctx.graph, BurnFakeQuant).with_memo(&memo);
        exec.run(feeds, &mut [&mut sim, &mut capture]).in_pass(pass)?;
        for (i, target) in targets.iter().enumerate() {
            let (reference, simulated) = match (&reference_capture.0.values[i], &capture.0.values[i]) {
                (Some(r), Some(s)) => (r, s),
                // Not a float tensor in either graph (an int64 shape output): nothing to compare.
                (None, None) => continue,
                _ => {
                    return Err(PassError::Invalid {
                        pass,
                        message: format!("comparing `{}`: computed by one graph only", target.name),
                    });
                }
            };
            let ((reference, shape), (simulated, sim_shape)) = (reference, simulated);
            if shape != sim_shape {
                return Err(PassError::Invalid {
                    pass,
                    message: format!("comparing `{}`: shape {sim_shape:?} against {shape:?}", target.name),
                });
            }
            accumulate(&mut sums[i], reference, simulated, shape, target.channel_axis).map_err(|message| {
                PassError::Invalid { pass, message: format!("comparing `{}`: {message}", target.name) }
            })?;
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    Ok(sums.into_iter().map(finish).collect())
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
