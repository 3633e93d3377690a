//! Quantization simulation: the hook that applies fake quantization around every operation
//! ([`QuantSimulation`], through a [`FakeQuantizer`]), the fake-quantization kernels
//! ([`fake_quant`]: linear and floating formats, CPU fast path and Burn path) and the
//! integer-exact simulation of fully quantized convolutions ([`integer`]) and the differentiable
//! simulation training runs on ([`training`]).

pub mod fake_quant;
pub mod integer;
pub mod training;

use crate::error::Result;
use crate::hooks::{ExecHook, OpInfo};
use crate::value::Value;
use integer::IntegerPlan;
use mppq_ir::quant::TensorQuantConfig;
use mppq_ir::{Graph, OpId};

/// Quantize-then-dequantize of one tensor under a config.
pub trait FakeQuantizer {
    fn fake_quant(&self, value: Value, config: &TensorQuantConfig) -> Result<Value>;
}

/// A borrowed fake quantizer: what the simulation inside a sub-graph uses (one type at every
/// nesting depth).
pub struct BorrowedFakeQuant<'q>(pub &'q dyn FakeQuantizer);

impl FakeQuantizer for BorrowedFakeQuant<'_> {
    fn fake_quant(&self, value: Value, config: &TensorQuantConfig) -> Result<Value> {
        self.0.fake_quant(value, config)
    }
}

/// Leaves values unchanged (the hook runs without quantizing anything).
pub struct IdentityFakeQuant;

impl FakeQuantizer for IdentityFakeQuant {
    fn fake_quant(&self, value: Value, _config: &TensorQuantConfig) -> Result<Value> {
        Ok(value)
    }
}

/// Applies each operation's input and output quantization configs (those in an active state:
/// `Activated`, `Passive`; `Overlapped` and baked configs are skipped) in plain forward
/// execution: inputs before the kernel, outputs after it.
pub struct QuantSimulation<'a, F: FakeQuantizer> {
    pub graph: &'a Graph,
    pub quantizer: F,
    /// How many tensors were fake-quantized (inputs, outputs): for tests and reports.
    pub applied: (usize, usize),
    /// Simulate fully quantized convolutions the way integer kernels compute them
    /// ([`integer`]); on by default.
    pub integer_kernels: bool,
    /// The integer plan of the operation running now.
    pending: Option<(OpId, IntegerPlan)>,
}

impl<'a, F: FakeQuantizer> QuantSimulation<'a, F> {
    pub fn new(graph: &'a Graph, quantizer: F) -> Self {
        Self { graph, quantizer, applied: (0, 0), integer_kernels: true, pending: None }
    }

    /// The same simulation with float math on dequantized values everywhere.
    pub fn float_kernels(mut self) -> Self {
        self.integer_kernels = false;
        self
    }

    fn apply(&self, slots: &mut [Option<Value>], configs: &[Option<TensorQuantConfig>]) -> Result<usize> {
        let mut n = 0;
        for (slot, config) in slots.iter_mut().zip(configs) {
            let Some(config) = config.as_ref().filter(|c| c.state.is_active()) else { continue };
            if let Some(value) = slot.take() {
                *slot = Some(self.quantizer.fake_quant(value, config)?);
                n += 1;
            }
        }
        Ok(n)
    }
}

impl<F: FakeQuantizer> ExecHook for QuantSimulation<'_, F> {
    fn before_op(&mut self, op: &OpInfo<'_>, inputs: &mut [Option<Value>]) -> Result<()> {
        self.pending = None;
        if let Some(cfg) = self.graph.operation(op.id)?.quant_config.as_ref() {
            self.applied.0 += self.apply(inputs, &cfg.input_configs)?;
            if let Some(mut plan) = IntegerPlan::plan(op.op_type, cfg).filter(|_| self.integer_kernels) {
                plan.integer_inputs(inputs)?;
                self.pending = Some((op.id, plan));
            }
        }
        Ok(())
    }

    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> Result<()> {
        if let Some((id, plan)) = self.pending.take()
            && id == op.id
        {
            plan.requantize(outputs)?;
        }
        if let Some(cfg) = self.graph.operation(op.id)?.quant_config.as_ref() {
            self.applied.1 += self.apply(outputs, &cfg.output_configs)?;
        }
        Ok(())
    }

    /// A sub-graph carries its own operations' configs: simulated the same way inside.
    fn enter_subgraph(&self, op: &OpInfo<'_>, attr: &str) -> Option<Box<dyn ExecHook + '_>> {
        let body = self.graph.operation(op.id).ok()?.attr(attr)?.as_graph(attr).ok()?;
        let mut inner = QuantSimulation::new(body, BorrowedFakeQuant(&self.quantizer));
        inner.integer_kernels = self.integer_kernels;
        Some(Box::new(inner))
    }
}
