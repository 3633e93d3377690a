//! The pass interface: a pass asks a small [`PassContext`] (graph, operator registry, device,
//! calibration data, progress) rather than the executor's internals, and reports what changed.

use crate::error::{InPass, Result};
use crate::progress::ProgressSink;
use mppq_exec::{Device, Executor, OpRegistry, Value};
use mppq_ir::Graph;

/// One step of the quantization pipeline.
pub trait Pass {
    /// Short snake_case name, used in errors, reports and progress.
    fn name(&self) -> &'static str;
    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport>;
}

/// What a pass may use.
pub struct PassContext<'a> {
    pub graph: &'a mut Graph,
    pub registry: &'a OpRegistry,
    pub device: &'a Device,
    /// The opset version of a domain (`""` = ai.onnx), for building executors.
    pub opsets: &'a dyn Fn(&str) -> i64,
    /// Calibration batches: (graph input name, value) feeds.
    pub batches: &'a [Vec<(String, Value)>],
    pub progress: &'a mut dyn ProgressSink,
}

impl PassContext<'_> {
    /// An executor for the graph as it is now. Build a new one after any structural edit or
    /// parameter change: an executor holds its own copy of the plan and the initializers.
    pub fn executor(&self, pass: &'static str) -> Result<Executor> {
        Executor::new(self.graph, self.registry, self.device, self.opsets).in_pass(pass)
    }
}

/// What a pass changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    pub pass: &'static str,
    /// How many configs, operations or parameters it changed.
    pub changed: usize,
    /// One line for humans (`"3 Conv+Relu pairs fused"`).
    pub summary: String,
}

impl PassReport {
    pub fn new(pass: &'static str, changed: usize, summary: impl Into<String>) -> Self {
        Self { pass, changed, summary: summary.into() }
    }
}

impl std::fmt::Display for PassReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.pass, self.summary)
    }
}
