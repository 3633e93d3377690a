//! The editing API: every mutation of a graph's wiring goes through here so that producer and
//! consumer links, names and graph inputs/outputs always stay consistent.

use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId, Operation, VarId, Variable};
use crate::tensor::TensorData;

/// `base`, or `base_1`, `base_2`, … : the first that `taken` says is free.
pub fn unused_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (1..).map(|i| format!("{base}_{i}")).find(|n| !taken(n)).unwrap_or_default()
}

impl Graph {
    /// Adds a variable; its name must be unused.
    pub fn add_variable(&mut self, mut var: Variable) -> Result<VarId> {
        if self.names.contains_key(&var.name) {
            return Err(IrError::DuplicateVariable(var.name));
        }
        var.producer = None;
        var.consumers.clear();
        let id = VarId(self.next_var);
        self.next_var += 1;
        self.names.insert(var.name.clone(), id);
        self.variables.insert(id, var);
        Ok(id)
    }

    /// The variable called `name`, created empty if it does not exist yet.
    pub fn ensure_variable(&mut self, name: &str) -> VarId {
        match self.names.get(name) {
            Some(id) => *id,
            None => {
                let id = VarId(self.next_var);
                self.next_var += 1;
                self.names.insert(name.to_string(), id);
                self.variables.insert(id, Variable::new(name));
                id
            }
        }
    }

    /// Adds a constant (initializer) variable.
    pub fn add_initializer(&mut self, name: impl Into<String>, value: TensorData) -> Result<VarId> {
        let mut var = Variable::new(name);
        var.value = Some(value);
        self.add_variable(var)
    }

    /// A name based on `base` that no variable uses yet.
    pub fn fresh_var_name(&self, base: &str) -> String {
        unused_name(base, |n| self.names.contains_key(n))
    }

    /// Gives every operation without a name, or with a name an earlier one has, a fresh one
    /// (`<OpType>_<n>`), in this graph and its sub-graphs; returns how many were renamed. Exports
    /// may leave node names empty, but configs, reports and quantization JSON key operations by
    /// name.
    pub fn name_operations(&mut self) -> usize {
        let mut renamed = 0;
        // Every name in use, and per type the next number to try (one pass, not a scan per name).
        let mut taken: std::collections::HashSet<String> = self.operations.values().map(|o| o.name.clone()).collect();
        let mut seen = std::collections::HashSet::new();
        let mut next: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for op in self.operations.values_mut() {
            if !op.name.is_empty() && seen.insert(op.name.clone()) {
                continue;
            }
            let k = next.entry(op.op_type.clone()).or_insert(0);
            let fresh = loop {
                let candidate = format!("{}_{k}", op.op_type);
                *k += 1;
                if !taken.contains(&candidate) {
                    break candidate;
                }
            };
            taken.insert(fresh.clone());
            seen.insert(fresh.clone());
            op.name = fresh;
            renamed += 1;
        }
        for op in self.operations.values_mut() {
            for a in op.attributes.values_mut() {
                if let crate::attribute::Attribute::Graph(body) = a {
                    renamed += body.name_operations();
                }
            }
        }
        renamed
    }

    /// A name based on `base` that no operation uses yet.
    pub fn fresh_op_name(&self, base: &str) -> String {
        unused_name(base, |n| self.operations.values().any(|o| o.name == n))
    }

    /// Adds `op` reading `inputs` and writing `outputs` (omitted optionals as `None`). An output
    /// that already has a producer is an error.
    pub fn add_operation(
        &mut self,
        mut op: Operation,
        inputs: &[Option<VarId>],
        outputs: &[Option<VarId>],
    ) -> Result<OpId> {
        for id in inputs.iter().chain(outputs).flatten() {
            self.variable(*id)?;
        }
        for (i, out) in outputs.iter().enumerate() {
            let Some(out) = out else { continue };
            let var = self.variable(*out)?;
            if let Some(p) = var.producer {
                return Err(IrError::DuplicateProducer {
                    name: var.name.clone(),
                    first: self.operation(p).map(|o| o.name.clone()).unwrap_or_default(),
                    second: op.name.clone(),
                });
            }
            if outputs[..i].contains(&Some(*out)) {
                return Err(IrError::DuplicateProducer {
                    name: var.name.clone(),
                    first: op.name.clone(),
                    second: op.name.clone(),
                });
            }
        }
        let id = OpId(self.next_op);
        self.next_op += 1;
        for v in inputs.iter().flatten() {
            self.variable_mut(*v)?.consumers.push(id);
        }
        for v in outputs.iter().flatten() {
            self.variable_mut(*v)?.producer = Some(id);
        }
        op.inputs = inputs.to_vec();
        op.outputs = outputs.to_vec();
        self.operations.insert(id, op);
        Ok(id)
    }

    /// Points input `index` of `op` at `var` (or omits it with `None`).
    pub fn set_op_input(&mut self, op: OpId, index: usize, var: Option<VarId>) -> Result<()> {
        if let Some(v) = var {
            self.variable(v)?;
        }
        let operation = self.operation(op)?;
        let old = *operation.inputs.get(index).ok_or_else(|| IrError::InvalidEdit {
            op: operation.name.clone(),
            message: format!("has no input {index}"),
        })?;
        if let Some(old) = old {
            let consumers = &mut self.variable_mut(old)?.consumers;
            if let Some(pos) = consumers.iter().position(|c| *c == op) {
                consumers.remove(pos);
            }
        }
        if let Some(v) = var {
            self.variable_mut(v)?.consumers.push(op);
        }
        self.operation_mut(op)?.inputs[index] = var;
        Ok(())
    }

    /// Points output `index` of `op` at `var`, which must have no producer; the previous output
    /// variable loses its producer.
    pub fn set_op_output(&mut self, op: OpId, index: usize, var: VarId) -> Result<()> {
        let operation = self.operation(op)?;
        let name = operation.name.clone();
        let old = *operation
            .outputs
            .get(index)
            .ok_or_else(|| IrError::InvalidEdit { op: name.clone(), message: format!("has no output {index}") })?;
        let target = self.variable(var)?;
        if let Some(p) = target.producer {
            return Err(IrError::DuplicateProducer {
                name: target.name.clone(),
                first: self.operation(p).map(|o| o.name.clone()).unwrap_or_default(),
                second: name,
            });
        }
        if let Some(old) = old {
            self.variable_mut(old)?.producer = None;
        }
        self.variable_mut(var)?.producer = Some(op);
        self.operation_mut(op)?.outputs[index] = Some(var);
        Ok(())
    }

    /// Appends an input to `op`.
    pub fn push_op_input(&mut self, op: OpId, var: Option<VarId>) -> Result<()> {
        self.operation_mut(op)?.inputs.push(None);
        let index = self.operation(op)?.inputs.len() - 1;
        self.set_op_input(op, index, var)
    }

    /// Removes `op`, unlinking it. Its outputs stay as variables without a producer.
    pub fn remove_operation(&mut self, op: OpId) -> Result<Operation> {
        let operation = self.operations.shift_remove(&op).ok_or(IrError::UnknownOperation(op.0))?;
        for v in operation.inputs.iter().flatten() {
            if let Some(var) = self.variables.get_mut(v)
                && let Some(pos) = var.consumers.iter().position(|c| *c == op)
            {
                var.consumers.remove(pos);
            }
        }
        for v in operation.outputs.iter().flatten() {
            if let Some(var) = self.variables.get_mut(v) {
                var.producer = None;
            }
        }
        Ok(operation)
    }

    /// Removes a pass-through `op` (one data input, one output) and reconnects: everything that
    /// read its output, graph outputs included, reads its first input instead. The output
    /// variable is removed.
    pub fn remove_operation_reconnect(&mut self, op: OpId) -> Result<Operation> {
        let operation = self.operation(op)?;
        let outputs: Vec<VarId> = operation.output_ids().collect();
        let (Some(input), [output]) = (operation.inputs.first().copied().flatten(), outputs.as_slice()) else {
            return Err(IrError::InvalidEdit {
                op: operation.name.clone(),
                message: "only an operation with a first input and exactly one output can be bypassed".into(),
            });
        };
        let output = *output;
        let removed = self.remove_operation(op)?;
        self.replace_variable(output, input)?;
        self.remove_variable(output)?;
        Ok(removed)
    }

    /// Makes every reader of `old` (operations and graph outputs) read `new` instead.
    pub fn replace_variable(&mut self, old: VarId, new: VarId) -> Result<()> {
        self.variable(new)?;
        let consumers = std::mem::take(&mut self.variable_mut(old)?.consumers);
        for c in &consumers {
            if let Some(op) = self.operations.get_mut(c) {
                for slot in op.inputs.iter_mut() {
                    if *slot == Some(old) {
                        *slot = Some(new);
                    }
                }
            }
        }
        self.variable_mut(new)?.consumers.extend(consumers);
        for out in self.outputs.iter_mut() {
            if *out == old {
                *out = new;
            }
        }
        Ok(())
    }

    /// Removes a variable that no operation produces or reads and that is no graph input/output.
    pub fn remove_variable(&mut self, var: VarId) -> Result<Variable> {
        let v = self.variable(var)?;
        if v.producer.is_some() || !v.consumers.is_empty() || self.inputs.contains(&var) || self.outputs.contains(&var)
        {
            return Err(IrError::InvalidEdit {
                op: v.name.clone(),
                message: "variable is still in use and cannot be removed".into(),
            });
        }
        let removed = self.variables.shift_remove(&var).ok_or(IrError::UnknownVariable(var.0))?;
        self.names.remove(&removed.name);
        Ok(removed)
    }

    pub fn rename_variable(&mut self, var: VarId, new_name: &str) -> Result<()> {
        if self.names.get(new_name).is_some_and(|id| *id != var) {
            return Err(IrError::DuplicateVariable(new_name.to_string()));
        }
        let v = self.variable_mut(var)?;
        let old = std::mem::replace(&mut v.name, new_name.to_string());
        self.names.remove(&old);
        self.names.insert(new_name.to_string(), var);
        Ok(())
    }

    pub fn rename_operation(&mut self, op: OpId, new_name: &str) -> Result<()> {
        self.operation_mut(op)?.name = new_name.to_string();
        Ok(())
    }

    /// Inserts `op` right after `var`: `op` reads `var` (then `extra_inputs`) and writes a new
    /// variable, and every former reader of `var` (graph outputs included) reads that instead.
    /// Returns the new operation and its output.
    pub fn insert_op_after(
        &mut self,
        var: VarId,
        op: Operation,
        extra_inputs: &[Option<VarId>],
    ) -> Result<(OpId, VarId)> {
        let base = format!("{}_{}", self.variable(var)?.name, op.op_type);
        let new_var = self.add_variable(Variable::new(self.fresh_var_name(&base)))?;
        self.replace_variable(var, new_var)?;
        let mut inputs = vec![Some(var)];
        inputs.extend_from_slice(extra_inputs);
        let id = self.add_operation(op, &inputs, &[Some(new_var)])?;
        Ok((id, new_var))
    }

    /// Inserts `op` right before `var`: whatever defined `var` (its producer, graph-input status
    /// or initializer value) now defines a new variable, which `op` reads (then `extra_inputs`)
    /// to write `var`. Readers of `var` are unchanged. Returns the new operation and variable.
    pub fn insert_op_before(
        &mut self,
        var: VarId,
        op: Operation,
        extra_inputs: &[Option<VarId>],
    ) -> Result<(OpId, VarId)> {
        let base = format!("{}_{}_in", self.variable(var)?.name, op.op_type);
        let new_var = self.add_variable(Variable::new(self.fresh_var_name(&base)))?;
        let v = self.variable_mut(var)?;
        let producer = v.producer.take();
        let value = v.value.take();
        let ty = v.ty.clone();
        let nv = self.variable_mut(new_var)?;
        nv.value = value;
        nv.ty = ty;
        if let Some(p) = producer {
            self.variable_mut(new_var)?.producer = Some(p);
            if let Some(pop) = self.operations.get_mut(&p) {
                for slot in pop.outputs.iter_mut() {
                    if *slot == Some(var) {
                        *slot = Some(new_var);
                    }
                }
            }
        }
        for input in self.inputs.iter_mut() {
            if *input == var {
                *input = new_var;
            }
        }
        let mut inputs = vec![Some(new_var)];
        inputs.extend_from_slice(extra_inputs);
        let id = self.add_operation(op, &inputs, &[Some(var)])?;
        Ok((id, new_var))
    }

    pub fn add_graph_input(&mut self, var: VarId) -> Result<()> {
        self.variable(var)?;
        if !self.inputs.contains(&var) {
            self.inputs.push(var);
        }
        Ok(())
    }

    pub fn remove_graph_input(&mut self, var: VarId) -> Result<()> {
        self.variable(var)?;
        self.inputs.retain(|v| *v != var);
        Ok(())
    }

    /// Adds a graph output. ONNX allows the same variable to be listed more than once.
    pub fn add_graph_output(&mut self, var: VarId) -> Result<()> {
        self.variable(var)?;
        self.outputs.push(var);
        Ok(())
    }

    pub fn remove_graph_output(&mut self, var: VarId) -> Result<()> {
        self.variable(var)?;
        self.outputs.retain(|v| *v != var);
        Ok(())
    }

    /// Removes operations whose outputs nobody reads (repeatedly), then variables that are
    /// neither used nor graph inputs/outputs. Returns how many operations were removed.
    pub fn remove_dead_code(&mut self) -> usize {
        let mut removed = 0;
        loop {
            let captured = self.names_read_by_subgraphs();
            let read = |v: VarId| {
                !self.consumers(v).is_empty() || self.outputs.contains(&v) || captured.contains(self.var_name(v))
            };
            let dead: Vec<OpId> =
                self.operations.iter().filter(|(_, op)| !op.output_ids().any(read)).map(|(id, _)| *id).collect();
            if dead.is_empty() {
                break;
            }
            for id in dead {
                if self.remove_operation(id).is_ok() {
                    removed += 1;
                }
            }
        }
        let unused: Vec<VarId> = self
            .variables
            .iter()
            .filter(|(id, v)| {
                v.producer.is_none()
                    && v.consumers.is_empty()
                    && !self.inputs.contains(id)
                    && !self.outputs.contains(id)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in unused {
            let _ = self.remove_variable(id);
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> (Graph, VarId, VarId, VarId, OpId, OpId) {
        let mut g = Graph::new("g");
        let x = g.ensure_variable("x");
        let y = g.ensure_variable("y");
        let z = g.ensure_variable("z");
        g.add_graph_input(x).unwrap();
        g.add_graph_output(z).unwrap();
        let a = g.add_operation(Operation::new("Relu", "a"), &[Some(x)], &[Some(y)]).unwrap();
        let b = g.add_operation(Operation::new("Neg", "b"), &[Some(y)], &[Some(z)]).unwrap();
        (g, x, y, z, a, b)
    }

    #[test]
    fn producers_and_consumers_are_linked() {
        let (g, x, y, _z, a, b) = chain();
        assert_eq!(g.consumers(x), &[a]);
        assert_eq!(g.producer(y), Some(a));
        assert_eq!(g.downstream(a), vec![b]);
        assert_eq!(g.upstream(b), vec![a]);
    }

    #[test]
    fn second_producer_is_rejected() {
        let (mut g, x, y, ..) = chain();
        let err = g.add_operation(Operation::new("Abs", "c"), &[Some(x)], &[Some(y)]).unwrap_err();
        assert!(err.to_string().contains("produced twice"), "{err}");
    }

    #[test]
    fn insert_after_moves_readers_and_graph_outputs() {
        let (mut g, _x, _y, z, _a, b) = chain();
        let (q, nz) = g.insert_op_after(z, Operation::new("Identity", "q"), &[]).unwrap();
        assert_eq!(g.outputs(), &[nz]);
        assert_eq!(g.producer(nz), Some(q));
        assert_eq!(g.consumers(z), &[q]);
        assert_eq!(g.producer(z), Some(b));
    }

    #[test]
    fn insert_before_keeps_readers() {
        let (mut g, _x, y, _z, a, b) = chain();
        let (q, ny) = g.insert_op_before(y, Operation::new("Identity", "q"), &[]).unwrap();
        assert_eq!(g.producer(ny), Some(a));
        assert_eq!(g.producer(y), Some(q));
        assert_eq!(g.consumers(y), &[b]);
        assert_eq!(g.topological_order().unwrap(), vec![a, q, b]);
    }

    #[test]
    fn remove_with_reconnect() {
        let (mut g, x, y, z, a, b) = chain();
        g.remove_operation_reconnect(a).unwrap();
        assert!(g.var_id("y").is_none());
        assert_eq!(g.consumers(x), &[b]);
        assert!(g.variable(y).is_err());
        g.remove_operation_reconnect(b).unwrap();
        assert_eq!(g.outputs(), &[x]);
        assert!(g.variable(z).is_err());
        assert_eq!(g.num_operations(), 0);
    }

    #[test]
    fn rename_and_dead_code() {
        let (mut g, x, ..) = chain();
        g.rename_variable(x, "input").unwrap();
        assert_eq!(g.var_id("input"), Some(x));
        assert!(g.rename_variable(x, "z").is_err());
        let w = g.ensure_variable("dead_out");
        g.add_operation(Operation::new("Relu", "dead"), &[Some(x)], &[Some(w)]).unwrap();
        assert_eq!(g.remove_dead_code(), 1);
        assert!(g.var_id("dead_out").is_none());
    }
}

#[cfg(test)]
mod naming_tests {
    use crate::graph::{Graph, Operation};

    #[test]
    fn unnamed_and_repeated_operations_get_fresh_names() {
        let mut g = Graph::new("g");
        let vars: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| g.ensure_variable(n)).collect();
        g.add_operation(Operation::new("Relu", ""), &[Some(vars[0])], &[Some(vars[1])]).unwrap();
        g.add_operation(Operation::new("Relu", "Relu_0"), &[Some(vars[1])], &[Some(vars[2])]).unwrap();
        g.add_operation(Operation::new("Relu", "Relu_0"), &[Some(vars[2])], &[Some(vars[3])]).unwrap();
        assert_eq!(g.name_operations(), 2);
        let names: Vec<&str> = g.operations().map(|(_, o)| o.name.as_str()).collect();
        assert_eq!(names, ["Relu_1", "Relu_0", "Relu_2"]);
        assert_eq!(g.name_operations(), 0, "idempotent");
    }
}
