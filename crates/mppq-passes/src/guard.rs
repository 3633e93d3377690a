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

use crate::compare::{CompareTarget, compare_to_reference, snr_db};
use crate::error::Result;
use crate::pass::PassContext;

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

/// The best output SNR so far. The reference is `PassContext::float_reference` (the float graph
/// before the first optimisation pass), shared with the analysis rather than copied again.
#[derive(Default)]
pub(crate) struct GuardState {
    pub(crate) current_db: Option<f64>,
}

impl GuardState {
    /// The output SNR of `ctx.graph` (simulated) against `ctx.float_reference` (float; the graph
    /// itself when none was taken), over the graph's float outputs: −10·log10 of the mean
    /// noise-to-signal ratio of the outputs.
    pub(crate) fn measure(&mut self, ctx: &mut PassContext<'_>, pass: &'static str) -> Result<f64> {
        // Out of the context while the comparison borrows it; put back below.
        let taken = ctx.float_reference.take();
        let own;
        let reference = match &taken {
            Some(r) => r,
            None => {
                own = ctx.graph.clone();
                &own
            }
        };
        let targets: Vec<CompareTarget> =
            reference.outputs().iter().map(|v| CompareTarget::seen(reference.var_name(*v))).collect();
        let batches = ctx.guard.batches;
        let stats = compare_to_reference(ctx, pass, reference, &targets, batches);
        ctx.float_reference = taken;
        let measured: Vec<f64> =
            stats?.iter().filter(|s| !s.mean_square_error.is_empty()).map(|s| s.noise_to_signal()).collect();
        let mean = measured.iter().sum::<f64>() / measured.len().max(1) as f64;
        Ok(snr_db(mean))
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
