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
use crate::runtime::compare::{NamedOutputs, float_outputs, mean_snr_db};
use crate::runtime::pass::PassContext;
use mppq_exec::{BurnFakeQuant, Executor, QuantSimulation, SimulationMemo};

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

/// The reference outputs and the best output SNR so far. The reference is
/// `PassContext::float_reference` (the float graph before the first optimisation pass, shared
/// with the analysis rather than copied); it does not change during a run, so its outputs on the
/// measured batches are computed once and kept (graph outputs only: small).
#[derive(Default)]
pub(crate) struct GuardState {
    pub(crate) current_db: Option<f64>,
    /// Per measured batch, the reference's float outputs by name.
    expected: Option<Vec<NamedOutputs>>,
}

impl GuardState {
    /// The output SNR of `ctx.graph` (simulated) against `ctx.float_reference` (float; the graph
    /// itself when none was taken), over the graph's float outputs: −10·log10 of the mean
    /// noise-to-signal ratio of the outputs.
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
                    let exec = Executor::new(reference, ctx.registry, ctx.device, ctx.opsets).in_pass(pass)?;
                    (0..batches)
                        .map(|b| Ok(float_outputs(exec.run(ctx.batch(b, pass)?, &mut []).in_pass(pass)?)))
                        .collect::<Result<Vec<_>>>()?
                }
            };
            self.expected = Some(expected);
        }
        let Some(expected) = self.expected.as_ref() else { return Ok(f64::INFINITY) };
        let exec = ctx.executor(pass)?;
        let outputs = expected.first().map_or(0, Vec::len);
        let (mut noise, mut signal) = (vec![0f64; outputs], vec![0f64; outputs]);
        let energy = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        ctx.progress.begin(&format!("{pass}: measuring the output SNR"), expected.len() as u64);
        let memo = SimulationMemo::new();
        for (b, reference) in expected.iter().enumerate() {
            let mut sim = QuantSimulation::new(ctx.graph, BurnFakeQuant).with_memo(&memo);
            let got = float_outputs(exec.run(ctx.batch(b, pass)?, &mut [&mut sim]).in_pass(pass)?);
            for (k, (name, want)) in reference.iter().enumerate() {
                let have = got.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                let have = have.ok_or_else(|| PassError::Invalid {
                    pass,
                    message: format!("output `{name}`: missing in the simulated graph"),
                })?;
                noise[k] += if have.len() == want.len() {
                    want.iter().zip(have).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>()
                } else {
                    // A data-dependent length (a decoding loop that stopped elsewhere): nothing
                    // is comparable, all of both is error.
                    energy(want) + energy(have)
                };
                signal[k] += energy(want);
            }
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        Ok(mean_snr_db(noise.iter().zip(&signal).map(|(n, s)| n / s.max(1e-12))))
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
