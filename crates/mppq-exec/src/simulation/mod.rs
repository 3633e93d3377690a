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
use crate::kernel::IntegerCodes;
use crate::tensor::Tensor;
use crate::value::Value;
use integer::IntegerPlan;
use mppq_ir::quant::TensorQuantConfig;
use mppq_ir::{Graph, OpId};
use std::collections::HashMap;
use std::sync::Mutex;

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
    /// Only these operation types on the integer path (all that have one when `None`).
    integer_types: Option<&'static [&'static str]>,
    /// The integer plan of the operation running now.
    pending: Option<(OpId, IntegerPlan)>,
    /// Where what was derived from constant inputs is kept across runs ([`Self::with_memo`]).
    memo: Option<&'a SimulationMemo>,
}

/// What a simulation derived from the constant inputs of operations (weights and biases:
/// fake-quantized, then turned into integer codes), kept across runs so that repeated runs do
/// not redo it, and so that the convolution's packed weights (kept per weight buffer) are reused
/// too: on ResNet-18 this was most of the simulated forward.
///
/// An entry is reused only while the input is the same buffer and its config is unchanged, so a
/// pass that changes a scale or a weight gets fresh values. One memo per graph; it keeps one
/// derived copy of each constant alive. CPU float32 constants only.
#[derive(Default)]
pub struct SimulationMemo {
    entries: Mutex<HashMap<(usize, OpId, usize), MemoEntry>>,
}

struct MemoEntry {
    source: Tensor,
    config: Option<TensorQuantConfig>,
    integer: bool,
    result: Value,
}

impl SimulationMemo {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<'a, F: FakeQuantizer> QuantSimulation<'a, F> {
    pub fn new(graph: &'a Graph, quantizer: F) -> Self {
        Self {
            graph,
            quantizer,
            applied: (0, 0),
            integer_kernels: true,
            integer_types: None,
            pending: None,
            memo: None,
        }
    }

    /// The same simulation, keeping what it derives from constant inputs in `memo` across runs.
    pub fn with_memo(mut self, memo: &'a SimulationMemo) -> Self {
        self.memo = Some(memo);
        self
    }

    /// The same simulation with integer kernels for `op_types` only (float math on dequantized
    /// values elsewhere): the reference of an executor that fuses just those, as our executor
    /// fuses QDQ convolutions into QLinearConv and runs the rest of an export in float.
    pub fn integer_kernels_for(mut self, op_types: &'static [&'static str]) -> Self {
        self.integer_types = Some(op_types);
        self
    }

    /// The same simulation with float math on dequantized values everywhere.
    pub fn float_kernels(mut self) -> Self {
        self.integer_kernels = false;
        self
    }

    /// Fake-quantizes the slots whose config is active, except those marked `done` (quantized
    /// already: from the memo, or put on the grid by an integer kernel), which are only counted;
    /// returns how many slots are quantized.
    fn apply(
        &self,
        slots: &mut [Option<Value>],
        configs: &[Option<TensorQuantConfig>],
        done: &[bool],
    ) -> Result<usize> {
        let mut n = 0;
        for (i, (slot, config)) in slots.iter_mut().zip(configs).enumerate() {
            let Some(config) = config.as_ref().filter(|c| c.state.is_active()) else { continue };
            let Some(value) = slot.take() else { continue };
            *slot = Some(if done.get(i).copied().unwrap_or(false) {
                value
            } else {
                self.quantizer.fake_quant(value, config)?
            });
            n += 1;
        }
        Ok(n)
    }

    /// Replaces each constant input (an initializer on the CPU) by what the simulation makes of
    /// it, from the memo when it holds a valid entry: fake-quantized when its config is active,
    /// then the integer code when `plan` converts inputs one by one. Returns which slots it
    /// handled.
    fn memoized_constants(
        &self,
        op: &OpInfo<'_>,
        configs: &[Option<TensorQuantConfig>],
        mut plan: Option<&mut IntegerPlan>,
        inputs: &mut [Option<Value>],
    ) -> Result<Vec<bool>> {
        let mut handled = vec![false; inputs.len()];
        let Some(memo) = self.memo else { return Ok(handled) };
        if plan.as_ref().is_some_and(|p| !p.converts_inputs_independently()) {
            return Ok(handled);
        }
        let integer = plan.is_some();
        let operation = self.graph.operation(op.id)?;
        for (i, var) in operation.inputs().iter().enumerate() {
            let Some(var) = var else { continue };
            let (Some(Value::Tensor(source)), Ok(variable)) = (inputs[i].as_ref(), self.graph.variable(*var)) else {
                continue;
            };
            let config = configs.get(i).and_then(Option::as_ref).filter(|c| c.state.is_active());
            if !variable.is_parameter() || crate::cpu::f32_values(source).is_none() || (config.is_none() && !integer) {
                continue;
            }
            let key = (std::ptr::from_ref(self.graph) as usize, op.id, i);
            let mut entries = memo.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let valid = entries.get(&key).filter(|e| {
                e.integer == integer && e.config.as_ref() == config && crate::cpu::same_buffer(&e.source, source)
            });
            let result = match valid {
                Some(entry) => entry.result.clone(),
                None => {
                    let source = source.clone();
                    let mut value = Value::Tensor(source.clone());
                    if let Some(config) = config {
                        value = self.quantizer.fake_quant(value, config)?;
                    }
                    if let Some(plan) = plan.as_deref_mut() {
                        let mut alone: Vec<Option<Value>> = vec![None; inputs.len()];
                        alone[i] = Some(value);
                        plan.integer_inputs(&mut alone)?;
                        value = alone[i].take().unwrap_or(Value::Tensor(source.clone()));
                    }
                    let entry = MemoEntry { source, config: config.cloned(), integer, result: value.clone() };
                    entries.insert(key, entry);
                    value
                }
            };
            inputs[i] = Some(result);
            handled[i] = true;
        }
        Ok(handled)
    }
}

impl<F: FakeQuantizer> ExecHook for QuantSimulation<'_, F> {
    fn before_op(&mut self, op: &OpInfo<'_>, inputs: &mut [Option<Value>]) -> Result<()> {
        self.pending = None;
        let Some(cfg) = self.graph.operation(op.id)?.quant_config.as_ref() else { return Ok(()) };
        let integer = self.integer_kernels && self.integer_types.is_none_or(|types| types.contains(&op.op_type));
        let mut plan = IntegerPlan::plan(op.op_type, cfg).filter(|_| integer);
        let handled = self.memoized_constants(op, &cfg.input_configs, plan.as_mut(), inputs)?;
        self.applied.0 += self.apply(inputs, &cfg.input_configs, &handled)?;
        if let Some(mut plan) = plan {
            // The memoized slots are already integer codes: hidden from the plan meanwhile.
            let hidden: Vec<(usize, Option<Value>)> =
                handled.iter().enumerate().filter(|(_, h)| **h).map(|(i, _)| (i, inputs[i].take())).collect();
            plan.integer_inputs(inputs)?;
            for (i, v) in hidden {
                inputs[i] = v;
            }
            self.pending = Some((op.id, plan));
        }
        Ok(())
    }

    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> Result<()> {
        // An integer plan leaves output 0 on its config's grid already: quantizing it again
        // would give the same values, so it is counted, not redone.
        let mut on_grid: &[bool] = &[];
        if let Some((id, plan)) = self.pending.take()
            && id == op.id
        {
            plan.requantize(outputs)?;
            on_grid = &[true];
        }
        if let Some(cfg) = self.graph.operation(op.id)?.quant_config.as_ref() {
            self.applied.1 += self.apply(outputs, &cfg.output_configs, on_grid)?;
        }
        Ok(())
    }

    fn integer_codes(&self, op: &OpInfo<'_>) -> Option<IntegerCodes> {
        self.pending.as_ref().filter(|(id, _)| *id == op.id).and_then(|(_, plan)| plan.integer_codes())
    }

    /// A sub-graph carries its own operations' configs: simulated the same way inside.
    fn enter_subgraph(&self, op: &OpInfo<'_>, attr: &str) -> Option<Box<dyn ExecHook + '_>> {
        let body = self.graph.operation(op.id).ok()?.attr(attr)?.as_graph(attr).ok()?;
        let mut inner = QuantSimulation::new(body, BorrowedFakeQuant(&self.quantizer));
        inner.integer_kernels = self.integer_kernels;
        inner.memo = self.memo;
        Some(Box::new(inner))
    }
}
