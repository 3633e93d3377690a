//! The guard: accuracy passes may not silently hurt. Before an optimisation pass's change is kept,
//! the pipeline measures the graph outputs' signal-to-noise ratio (simulated vs the float model,
//! on the first calibration batches) and reverts the change unless the ratio rose by at least
//! `min_gain_db`. A pass
//! says how it is checked with [`Pass::guard`](crate::Pass::guard):
//!
//! - [`Guard::None`]: not checked (structural and calibration passes);
//! - [`Guard::Recalibrate`]: a change to the float graph or the configs made before calibration
//!   (equalization, SmoothQuant, observer choices): the calibration passes that follow run again
//!   on the changed graph before the measurement;
//! - [`Guard::Measure`]: a change to calibrated parameters (bias correction): measured directly.

use crate::error::Result;
use crate::error::{InPass, PassError};
use crate::runtime::compare::{NamedOutputs, float_outputs};
use crate::runtime::pass::PassContext;
use mppq_exec::{BurnFakeQuant, Executor, QuantSimulation, SimulationMemo};
use mppq_quant::metrics::OutputNoise;
use mppq_quant::padding::TokenPadding;
use rayon::prelude::*;

/// How the pipeline checks a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    None,
    Recalibrate,
    Measure,
}

/// The guard's knobs (from the `guard` section of the setting).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardOptions {
    /// Measure and revert (`false`: every change is kept unmeasured).
    pub enabled: bool,
    /// Measure on at most this many calibration batches.
    pub batches: usize,
    /// Keep a change only when it raises the output SNR by at least this much (dB). The guard
    /// measures on the calibration batches, which the pass also learned from: smaller gains
    /// there did not carry over to held-out data in `cargo xtask optimize-table`.
    pub min_gain_db: f64,
}

impl Default for GuardOptions {
    fn default() -> Self {
        Self { enabled: true, batches: 16, min_gain_db: 0.2 }
    }
}

impl GuardOptions {
    /// Whether a change from `before` to `after` dB is kept.
    pub fn keeps(&self, before: f64, after: f64) -> bool {
        after >= before + self.min_gain_db
    }
}

/// What the guard measured around one pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardOutcome {
    /// Output SNR (dB) before and after the pass.
    pub before_db: f64,
    pub after_db: f64,
    /// Whether the change was kept.
    pub kept: bool,
}

impl std::fmt::Display for GuardOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.kept { "kept" } else { "no gain: undone" };
        write!(f, "output SNR {:.2} → {:.2} dB, {verdict}", self.before_db, self.after_db)
    }
}

/// The least signal energy an output counts with: an output that is silent in float (all zeros
/// on the measured batches) ranks its noise against 1e-12, a large but finite ratio, rather than
/// dividing by zero. The same floor as [`ErrorStats::noise_to_signal`](crate::ErrorStats); the
/// accuracy budget floors at 1e-30 instead. Kept as it has been: another floor would change the
/// guard's decisions on models with a silent output.
const GUARD_SIGNAL_FLOOR: f64 = 1e-12;

/// The most bytes of reference outputs the guard holds (the calibration cache's bound).
const REFERENCE_BYTES: usize = mppq_quant::calibrate::ObservationCache::OUTPUT_BYTES;

/// How many calibration batches a measurement simulates at once. The kernels split each
/// operation over the cores, but on small models much of a forward is per-operation overhead
/// and operations too small to split: two batches side by side kept both of 2 cores busy (the
/// guard's measurements on the corpus' audio CNN: 1.3 of 2 cores before). Two, not one per core:
/// each batch in flight holds its activations, and larger machines split big operations well.
/// The sums stay those of one batch after the other (compared in batch order).
const BATCHES_IN_FLIGHT: usize = 2;

/// The reference outputs and the best output SNR so far. The reference is
/// `PassContext::float_reference` (the float graph before the first optimisation pass, shared
/// with the analysis rather than copied); it does not change during a run, so its outputs on the
/// measured batches are computed once and kept (graph outputs only: small).
#[derive(Default)]
pub(crate) struct GuardState {
    pub(crate) current_db: Option<f64>,
    /// Per measured batch, the reference's float outputs by name.
    expected: Option<Vec<NamedOutputs>>,
    /// Whether `expected` has its padding tokens blanked (done in the first measurement, which
    /// has the batches' masks at hand).
    expected_blanked: bool,
}

impl GuardState {
    /// The output SNR of `ctx.graph` (simulated) against `ctx.float_reference` (float; the graph
    /// itself when none was taken), over the graph's float outputs: −10·log10 of the mean
    /// noise-to-signal ratio of the outputs, padding tokens left out.
    pub(crate) fn measure(&mut self, ctx: &mut PassContext<'_>, pass: &'static str) -> Result<f64> {
        let batches = ctx.guard.batches.min(ctx.data.batch_count());
        if self.expected.is_none() {
            let reference: &mppq_ir::Graph = ctx.float_reference.as_ref().unwrap_or(ctx.graph);
            // Calibration ran this float graph on these batches already and kept the outputs.
            let fingerprint = reference.float_fingerprint();
            let kept: Option<Vec<NamedOutputs>> =
                (0..batches).map(|b| ctx.observations.float_outputs(fingerprint, b).cloned()).collect();
            let expected = match kept {
                Some(kept) => kept,
                None => {
                    // Held for the whole run: at most REFERENCE_BYTES (and at least one batch),
                    // so a model with huge outputs measures on fewer batches instead of
                    // aborting on memory (an Expand to 1 GB outputs: `run` worked, the guard
                    // aborted holding 16 batches of it).
                    let limit = REFERENCE_BYTES.min(mppq_exec::budget::max_tensor_bytes() as usize);
                    let exec = Executor::new(reference, ctx.registry, ctx.device, ctx.opsets).in_pass(pass)?;
                    let (mut kept, mut bytes) = (Vec::new(), 0usize);
                    for b in 0..batches {
                        let outputs = float_outputs(exec.run(ctx.batch(b, pass)?, &mut []).in_pass(pass)?);
                        bytes += outputs.iter().map(|(_, v)| v.len() * 4).sum::<usize>();
                        if b > 0 && bytes > limit {
                            break;
                        }
                        kept.push(outputs);
                    }
                    kept
                }
            };
            self.expected = Some(expected);
        }
        let blank_expected = !self.expected_blanked;
        let Some(expected) = self.expected.as_mut() else { return Ok(f64::INFINITY) };
        // Padding tokens are not compared (see `mppq_quant::padding`).
        let padding = TokenPadding::find(ctx.graph);
        let exec = ctx.executor(pass)?;
        let mut sums = OutputNoise::new(expected.first().map_or(0, Vec::len));
        ctx.progress.begin(&format!("{pass}: measuring the output SNR"), expected.len() as u64);
        let memo = SimulationMemo::new();
        let graph: &mppq_ir::Graph = ctx.graph;
        let mut first = 0;
        while first < expected.len() {
            // A few batches at once (see BATCHES_IN_FLIGHT): read here, run in parallel, compared
            // in batch order below, so the sums are those of one batch after the other.
            let end = (first + BATCHES_IN_FLIGHT).min(expected.len());
            let feeds: Vec<mppq_quant::Feeds> = (first..end).map(|b| ctx.batch(b, pass)).collect::<Result<_>>()?;
            let paddings: Vec<_> = feeds.iter().map(|f| padding.as_ref().and_then(|p| p.batch(f))).collect();
            let runs: Vec<_> = feeds
                .into_par_iter()
                .map(|feeds| {
                    let mut sim = QuantSimulation::new(graph, BurnFakeQuant).with_memo(&memo);
                    exec.run(feeds, &mut [&mut sim]).map(float_outputs)
                })
                .collect();
            for ((reference, run), batch_padding) in expected[first..end].iter_mut().zip(runs).zip(paddings) {
                let mut got = run.in_pass(pass)?;
                if let Some(batch_padding) = &batch_padding {
                    batch_padding.blank(&mut got);
                    if blank_expected {
                        batch_padding.blank(reference);
                    }
                }
                for (k, (name, want)) in reference.iter().enumerate() {
                    let have = got.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                    let have = have.ok_or_else(|| PassError::Invalid {
                        pass,
                        message: format!("output `{name}`: missing in the simulated graph"),
                    })?;
                    if have.len() == want.len() {
                        sums.add(k, want, have);
                    } else {
                        // A data-dependent length (a decoding loop that stopped elsewhere):
                        // nothing is comparable, all of both is error.
                        sums.add_unaligned(k, want, have);
                    }
                }
                ctx.progress.advance(1);
            }
            first = end;
        }
        ctx.progress.finish();
        self.expected_blanked = true;
        Ok(sums.mean_snr_db(GUARD_SIGNAL_FLOOR))
    }

    /// The SNR before the next pass: the last measurement, or a new one.
    pub(crate) fn current(&mut self, ctx: &mut PassContext<'_>, pass: &'static str) -> Result<f64> {
        match self.current_db {
            Some(db) => Ok(db),
            None => {
                let db = self.measure(ctx, pass)?;
                self.current_db = Some(db);
                Ok(db)
            }
        }
    }
}
