//! The engine: turns a graph into a plan (kernels built once, initializers uploaded once, in
//! topological order) and runs it, whole or up to chosen outputs, calling hooks around each
//! operation and freeing every intermediate value right after its last reader.

use crate::device::Device;
use crate::error::{ExecError, Result};
use crate::hooks::{ExecHook, OpInfo};
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, is_low_precision};
use crate::value::Value;
use mppq_ir::{Graph, OpId, VarId};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

struct Step {
    op: OpId,
    name: String,
    op_type: String,
    kernel: Box<dyn Kernel>,
    inputs: Vec<Option<usize>>,
    outputs: Vec<Option<usize>>,
    /// Enclosing-scope values its sub-graphs read: (name, slot), resolved after all slots exist.
    implicit: Vec<(String, usize)>,
    /// Names of its sub-graph attributes (If branches, loop bodies), for hooks.
    subgraphs: Vec<String>,
}

/// A graph prepared for execution on one device.
pub struct Executor {
    device: Device,
    steps: Vec<Step>,
    slot_names: Vec<String>,
    constants: Vec<(usize, Value)>,
    feeds: Vec<(String, usize)>,
    outputs: Vec<(String, usize)>,
    /// Names this (sub-)graph reads from enclosing scopes.
    captured: Vec<(String, usize)>,
}

impl Executor {
    /// Prepares `graph` with the operators of `registry`. Every operator is built now, so an
    /// unsupported operator or a bad attribute is reported before anything runs.
    pub fn new(graph: &Graph, registry: &OpRegistry, device: &Device, opsets: &dyn Fn(&str) -> i64) -> Result<Self> {
        let mut slots: HashMap<VarId, usize> = HashMap::new();
        let mut slot_names = Vec::new();
        let mut slot = |id: VarId, g: &Graph| -> usize {
            *slots.entry(id).or_insert_with(|| {
                slot_names.push(g.var_name(id).to_string());
                slot_names.len() - 1
            })
        };
        let mut constants = Vec::new();
        for (id, v) in graph.initializers() {
            if let Some(t) = &v.value {
                let tensor = Tensor::from_data(t, device).map_err(|e| match e {
                    ExecError::Input { message, .. } => ExecError::Input { name: v.name.clone(), message },
                    other => other,
                })?;
                constants.push((slot(id, graph), Value::Tensor(tensor)));
            }
        }
        let feeds =
            graph.feed_inputs().into_iter().map(|id| (graph.var_name(id).to_string(), slot(id, graph))).collect();
        let mut steps = Vec::new();
        for id in graph.topological_order()? {
            let op = graph.operation(id)?;
            let opset = if op.opset > 0 { op.opset } else { opsets(&op.domain) };
            let node = OpNode { op, opset, device, registry };
            let kernel = registry.build(&node)?;
            let names = graph.implicit_input_names(id);
            steps.push((
                Step {
                    op: id,
                    name: node.label().to_string(),
                    op_type: op.op_type.clone(),
                    kernel,
                    inputs: op.inputs().iter().map(|v| v.map(|v| slot(v, graph))).collect(),
                    outputs: op.outputs().iter().map(|v| v.map(|v| slot(v, graph))).collect(),
                    implicit: Vec::new(),
                    subgraphs: op
                        .attributes
                        .iter()
                        .filter(|(_, a)| matches!(a, mppq_ir::Attribute::Graph(_)))
                        .map(|(n, _)| n.clone())
                        .collect(),
                },
                names,
            ));
        }
        let outputs = graph.outputs().iter().map(|id| (graph.var_name(*id).to_string(), slot(*id, graph))).collect();
        // Names read from enclosing scopes get a slot even when only a nested sub-graph reads
        // them (this graph then has no variable of that name): the value is passed through.
        let mut captured: Vec<(String, Option<usize>)> = graph
            .captured_names()
            .into_iter()
            .map(|n| {
                let s = graph.var_id(&n).map(|id| slot(id, graph));
                (n, s)
            })
            .collect();
        for (name, s) in captured.iter_mut().filter(|(_, s)| s.is_none()) {
            slot_names.push(name.clone());
            *s = Some(slot_names.len() - 1);
        }
        let captured: Vec<(String, usize)> = captured.into_iter().filter_map(|(n, s)| s.map(|s| (n, s))).collect();
        let mut steps: Vec<Step> = steps
            .into_iter()
            .map(|(step, names): (Step, Vec<String>)| {
                let implicit =
                    names.into_iter().filter_map(|n| slot_names.iter().position(|x| *x == n).map(|s| (n, s))).collect();
                Step { implicit, ..step }
            })
            .collect();
        steps.shrink_to_fit();
        Ok(Self { device: device.clone(), steps, slot_names, constants, feeds, outputs, captured })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Names of the inputs a caller must feed, in graph order.
    pub fn input_names(&self) -> Vec<&str> {
        self.feeds.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Runs the whole graph; returns the graph outputs in order.
    pub fn run(&self, feeds: Vec<(String, Value)>, hooks: &mut [&mut dyn ExecHook]) -> Result<Vec<(String, Value)>> {
        let wanted: Vec<String> = self.outputs.iter().map(|(n, _)| n.clone()).collect();
        self.run_scoped(feeds, &wanted, &HashMap::new(), hooks)
    }

    /// Runs only what `wanted` (any variable names) needs; returns them in that order.
    pub fn run_until(
        &self,
        feeds: Vec<(String, Value)>,
        wanted: &[String],
        hooks: &mut [&mut dyn ExecHook],
    ) -> Result<Vec<(String, Value)>> {
        self.run_scoped(feeds, wanted, &HashMap::new(), hooks)
    }

    /// Runs with enclosing-scope values available by name (for sub-graphs).
    pub fn run_scoped(
        &self,
        feeds: Vec<(String, Value)>,
        wanted: &[String],
        captured: &HashMap<String, Value>,
        hooks: &mut [&mut dyn ExecHook],
    ) -> Result<Vec<(String, Value)>> {
        crate::cancel::check()?;
        let slot_of = |name: &str| self.slot_names.iter().position(|n| n == name);
        let wanted_slots: Vec<usize> = wanted
            .iter()
            .map(|n| slot_of(n).ok_or_else(|| ExecError::MissingValue(n.clone())))
            .collect::<Result<_>>()?;

        // Which steps are needed: walk back from the wanted slots.
        let producer: HashMap<usize, usize> =
            self.steps.iter().enumerate().flat_map(|(i, s)| s.outputs.iter().flatten().map(move |o| (*o, i))).collect();
        let mut needed = vec![false; self.steps.len()];
        let mut stack: Vec<usize> = wanted_slots.clone();
        let mut seen: HashSet<usize> = HashSet::new();
        while let Some(s) = stack.pop() {
            if !seen.insert(s) {
                continue;
            }
            if let Some(&i) = producer.get(&s)
                && !needed[i]
            {
                needed[i] = true;
                let step = &self.steps[i];
                stack.extend(step.inputs.iter().flatten().copied());
                stack.extend(step.implicit.iter().map(|(_, s)| *s));
            }
        }

        // Last step reading each slot, so values are dropped as soon as possible.
        let mut last_use: HashMap<usize, usize> = HashMap::new();
        for (i, step) in self.steps.iter().enumerate().filter(|(i, _)| needed[*i]) {
            for s in step.inputs.iter().flatten().chain(step.implicit.iter().map(|(_, s)| s)) {
                last_use.insert(*s, i);
            }
        }
        let keep: HashSet<usize> = wanted_slots.iter().copied().collect();

        let mut values: Vec<Option<Value>> = vec![None; self.slot_names.len()];
        for (slot, v) in &self.constants {
            values[*slot] = Some(v.clone());
        }
        for (name, slot) in &self.captured {
            if let Some(v) = captured.get(name) {
                values[*slot] = Some(v.clone());
            }
        }
        let mut fed: HashSet<usize> = HashSet::new();
        for (name, value) in feeds {
            // Feeding an initializer-backed input overrides its default, as ONNX allows.
            let slot = slot_of(&name).ok_or_else(|| ExecError::Input {
                name: name.clone(),
                message: format!("is not an input of the graph (inputs: {})", self.input_names().join(", ")),
            })?;
            values[slot] = Some(value);
            fed.insert(slot);
        }
        for (name, slot) in &self.feeds {
            if !fed.contains(slot) && needed.iter().zip(&self.steps).any(|(n, s)| *n && s.inputs.contains(&Some(*slot)))
            {
                return Err(ExecError::Input { name: name.clone(), message: "was not fed".into() });
            }
        }

        for (i, step) in self.steps.iter().enumerate() {
            if !needed[i] {
                continue;
            }
            // After a backend panic a GPU device may hold corrupt buffers: refuse to compute.
            if let Some(why) = self.device.poisoned() {
                return Err(ExecError::DevicePoisoned {
                    node: step.name.clone(),
                    op_type: step.op_type.clone(),
                    cause: why,
                });
            }
            let mut inputs: Vec<Option<Value>> = Vec::with_capacity(step.inputs.len());
            for s in &step.inputs {
                let v = match s {
                    None => None,
                    Some(s) => {
                        let last = last_use.get(s) == Some(&i)
                            && !keep.contains(s)
                            && step.inputs.iter().filter(|x| **x == Some(*s)).count() == 1;
                        let v = if last { values[*s].take() } else { values[*s].clone() };
                        Some(v.ok_or_else(|| ExecError::MissingValue(self.slot_names[*s].clone()))?)
                    }
                };
                inputs.push(v);
            }
            if !step.kernel.handles_low_precision()
                && let Some(dt) = inputs
                    .iter()
                    .flatten()
                    .filter_map(Value::as_tensor)
                    .find_map(|t| t.stand_in_for().filter(|d| is_low_precision(*d)))
            {
                return Err(ExecError::NotImplemented {
                    node: step.name.clone(),
                    op_type: step.op_type.clone(),
                    feature: format!("{dt} inputs (low-precision tensors go only to casts, Q/DQ and data movement)"),
                });
            }
            let info = OpInfo { id: step.op, name: &step.name, op_type: &step.op_type };
            for h in hooks.iter_mut() {
                h.before_op(&info, &mut inputs)?;
            }
            let mut scope = HashMap::new();
            for (name, s) in &step.implicit {
                if let Some(v) = &values[*s] {
                    scope.insert(name.clone(), v.clone());
                }
            }
            let stand_in = inputs.iter().flatten().filter_map(Value::as_tensor).find_map(Tensor::stand_in_for);
            let subgraph_hooks = RefCell::new(
                step.subgraphs
                    .iter()
                    .flat_map(|attr| {
                        hooks.iter().filter_map(|h| h.enter_subgraph(&info, attr)).map(|h| (attr.clone(), h))
                    })
                    .collect(),
            );
            let ctx = KernelContext {
                device: &self.device,
                node: &step.name,
                op_type: &step.op_type,
                captured: &scope,
                subgraph_hooks,
                integer_codes: hooks.iter().find_map(|h| h.integer_codes(&info)),
            };
            // Burn asserts on inconsistent shapes; an operator that missed a check must still
            // not bring the process down.
            let result = catch_unwind(AssertUnwindSafe(|| step.kernel.run(&ctx, inputs))).unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                self.device
                    .poison(format!("node `{}` ({}) panicked in the backend: {message}", step.name, step.op_type));
                Err(ExecError::Backend { node: step.name.clone(), op_type: step.op_type.clone(), message })
            });
            drop(ctx);
            let mut outputs = result?;
            Tensor::adopt_stand_in(stand_in, &mut outputs);
            outputs.resize(step.outputs.len(), None);
            for h in hooks.iter_mut() {
                h.after_op(&info, &mut outputs)?;
            }
            for (slot, v) in step.outputs.iter().zip(outputs) {
                if let Some(slot) = slot {
                    values[*slot] = v;
                }
            }
            // Implicit reads are done too.
            for (_, s) in &step.implicit {
                if last_use.get(s) == Some(&i) && !keep.contains(s) {
                    values[*s] = None;
                }
            }
        }
        wanted
            .iter()
            .zip(&wanted_slots)
            .map(|(n, s)| values[*s].clone().map(|v| (n.clone(), v)).ok_or_else(|| ExecError::MissingValue(n.clone())))
            .collect()
    }
}
