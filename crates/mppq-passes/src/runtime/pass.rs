//! The pass interface: a pass asks a small [`PassContext`] rather than the executor's internals:
//! the graph, the operator registry and device, the calibration data as a stream, statistics it
//! declared ([`Pass::statistics`], collected for it in one run per graph mode), a block runner
//! ([`crate::runtime::block`]), weights and biases by role ([`crate::runtime::params`]) and progress. It reports what
//! it changed in a [`PassReport`].

use crate::error::{InPass, Result};
use crate::runtime::guard::{Guard, GuardOptions, GuardOutcome};
use crate::runtime::progress::ProgressSink;
use crate::runtime::statistics::{StatRequest, Statistics};
use mppq_dispatch::Dispatch;
use mppq_exec::{Device, Executor, OpRegistry};
use mppq_ir::Graph;
use mppq_quant::CalibrationData;

/// One step of the quantization pipeline.
pub trait Pass {
    /// Short snake_case name, used in errors, reports and progress.
    fn name(&self) -> &'static str;
    /// The statistics this pass needs, on the graph as it is when the pass starts. The pipeline
    /// collects every request in one run over the calibration data per graph mode (float,
    /// simulated) and hands them over as [`PassContext::statistics`]. None by default.
    fn statistics(&self, _graph: &Graph) -> Result<Vec<StatRequest>> {
        Ok(Vec::new())
    }
    /// How the pipeline checks this pass's change ([`crate::runtime::guard`]): not at all by default.
    fn guard(&self) -> Guard {
        Guard::None
    }
    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport>;
}

/// What a pass may use.
pub struct PassContext<'a> {
    pub graph: &'a mut Graph,
    pub registry: &'a OpRegistry,
    pub device: &'a Device,
    /// The opset version of a domain (`""` = ai.onnx), for building executors.
    pub opsets: &'a dyn Fn(&str) -> i64,
    /// Calibration batches, one at a time ([`CalibrationData`]).
    pub data: &'a dyn CalibrationData,
    pub progress: &'a mut dyn ProgressSink,
    /// The statistics the running pass declared (empty before the pipeline collected them).
    pub statistics: Statistics,
    /// The dispatch decided by the `dispatch` step, for the caller's reports.
    pub dispatch: Option<Dispatch>,
    /// How the pipeline guards optimisation passes.
    pub guard: GuardOptions,
    /// The float graph before the first optimisation pass ([`Pass::guard`] not `None`): those
    /// may change what the float model computes (bias correction, high-bias absorption, Clip
    /// bounds removed), so the graph outputs are measured against this. `None` while no such
    /// pass ran. Internal tensors may be rescaled (equalization): compare those with the final
    /// graph's own float run.
    pub float_reference: Option<Graph>,
    /// The `percentile` observer's percentile chosen by `range_search`, over the calibration
    /// setting's (`None`: not chosen). Part of the state the guard restores on undo.
    pub percentile: Option<f64>,
    /// Activation statistics of earlier calibration runs, reused while the float graph is the
    /// same (`range_search`'s candidates only change observers).
    pub observations: mppq_quant::calibrate::ObservationCache,
}

impl<'a> PassContext<'a> {
    pub fn new(
        graph: &'a mut Graph,
        registry: &'a OpRegistry,
        device: &'a Device,
        opsets: &'a dyn Fn(&str) -> i64,
        data: &'a dyn CalibrationData,
        progress: &'a mut dyn ProgressSink,
    ) -> Self {
        Self {
            graph,
            registry,
            device,
            opsets,
            data,
            progress,
            statistics: Statistics::default(),
            dispatch: None,
            guard: GuardOptions::default(),
            float_reference: None,
            percentile: None,
            observations: Default::default(),
        }
    }

    /// Calibration batch `index` on the context's device; an unreadable batch is an error of
    /// `pass` naming the batch.
    pub fn batch(&self, index: usize, pass: &'static str) -> Result<mppq_quant::Feeds> {
        self.data.batch(index, self.device).map_err(|message| crate::PassError::Invalid {
            pass,
            message: format!("calibration batch {index}: {message}"),
        })
    }

    /// An executor for the graph as it is now. Build a new one after any structural edit or
    /// parameter change: an executor holds its own copy of the plan and the initializers.
    pub fn executor(&self, pass: &'static str) -> Result<Executor> {
        Executor::new(self.graph, self.registry, self.device, self.opsets).in_pass(pass)
    }
}

/// What a pass changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassReport {
    pub pass: &'static str,
    /// How many configs, operations or parameters it changed.
    pub changed: usize,
    /// One line for humans (`"3 Conv+Relu pairs fused"`).
    pub summary: String,
    /// Wall time of the pass, statistics collection included (set by the pipeline runner).
    pub seconds: f64,
    /// What the guard measured, for a guarded pass that changed something.
    pub guard: Option<GuardOutcome>,
}

impl PassReport {
    pub fn new(pass: &'static str, changed: usize, summary: impl Into<String>) -> Self {
        Self { pass, changed, summary: summary.into(), seconds: 0.0, guard: None }
    }
}

impl std::fmt::Display for PassReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.pass, self.summary)?;
        if let Some(g) = &self.guard {
            write!(f, "; {g}")?;
        }
        write!(f, " ({:.3} s)", self.seconds)
    }
}
