//! Cutting a block out of a graph: [`Graph::extract`] copies the operations that compute a set
//! of variables from another set (the cuts) into a graph of their own, so a pass can run one
//! block from cached inputs (block reconstruction, per-layer error, bias correction).

use crate::error::{IrError, Result};
use crate::quant::ConfigLocation;
use crate::{Graph, OpId, VarId, Variable};
use std::collections::{HashMap, HashSet};

impl Graph {
    /// A new graph computing `outputs` from `inputs`: the operations between the two cuts (in
    /// this graph's topological order, with their attributes, precision and quantization
    /// configs), the initializers they read, `inputs` as graph inputs and `outputs` as graph
    /// outputs; names are kept, so values can be fed and read by name. An operation of the block
    /// that reads a value neither computed inside, an initializer nor among `inputs` is an error
    /// naming it (the cut is incomplete).
    pub fn extract(&self, inputs: &[VarId], outputs: &[VarId]) -> Result<Graph> {
        let fail = |message: String| IrError::Extract { graph: self.name.clone(), message };
        let cut: HashSet<VarId> = inputs.iter().copied().collect();
        let mut ops: HashSet<OpId> = HashSet::new();
        let mut read: HashSet<VarId> = HashSet::new();
        let mut stack: Vec<VarId> = outputs.to_vec();
        while let Some(v) = stack.pop() {
            if !read.insert(v) || cut.contains(&v) {
                continue;
            }
            match self.producer(v) {
                Some(p) => {
                    if ops.insert(p) {
                        stack.extend(self.operation(p)?.input_ids());
                        stack.extend(self.implicit_inputs(p));
                    }
                }
                None if self.variable(v)?.is_parameter() => {}
                None => {
                    return Err(fail(format!(
                        "the block reads `{}`, which is neither computed inside it, an initializer nor a cut input",
                        self.var_name(v)
                    )));
                }
            }
        }
        let mut block = Graph::new(format!("{}_block", self.name));
        let copy = |block: &mut Graph, v: VarId| -> Result<VarId> {
            let var = self.variable(v)?;
            if let Some(id) = block.var_id(&var.name) {
                return Ok(id);
            }
            let mut fresh = Variable::new(var.name.clone());
            fresh.value = var.value.clone();
            fresh.ty = var.ty.clone();
            block.add_variable(fresh)
        };
        for v in inputs {
            let id = copy(&mut block, *v)?;
            block.add_graph_input(id)?;
        }
        // Operation ids of this graph → the block's, to carry configs' dominance links over.
        let mut ids: HashMap<OpId, OpId> = HashMap::new();
        for id in self.topological_order()?.into_iter().filter(|id| ops.contains(id)) {
            let op = self.operation(id)?;
            let ins =
                op.inputs().iter().map(|v| v.map(|v| copy(&mut block, v)).transpose()).collect::<Result<Vec<_>>>()?;
            let outs =
                op.outputs().iter().map(|v| v.map(|v| copy(&mut block, v)).transpose()).collect::<Result<Vec<_>>>()?;
            // Values the operation's sub-graphs read by name must exist in the block too.
            for v in self.implicit_inputs(id) {
                copy(&mut block, v)?;
            }
            let mut fresh = op.clone();
            fresh.inputs.clear();
            fresh.outputs.clear();
            let new_id = block.add_operation(fresh, &ins, &outs)?;
            ids.insert(id, new_id);
        }
        for v in outputs {
            let id = copy(&mut block, *v)?;
            block.add_graph_output(id)?;
        }
        relink_dominance(&mut block, &ids);
        Ok(block)
    }
}

/// Points the block's dominated configs at the block's operations. A config whose dominator stayed
/// outside the block quantizes its tensor itself there: an `Overlapped` one becomes `Initial`
/// (to be calibrated in the block), an active one keeps the parameters it copied.
fn relink_dominance(block: &mut Graph, ids: &HashMap<OpId, OpId>) {
    let ops: Vec<OpId> = block.operations().map(|(id, _)| id).collect();
    for op in ops {
        let Ok(o) = block.operation_mut(op) else { continue };
        let Some(config) = o.quant_config.as_mut() else { continue };
        for c in config.configs_mut() {
            let Some(loc) = c.dominated_by else { continue };
            match ids.get(&loc.op) {
                Some(new) => c.dominated_by = Some(ConfigLocation { op: *new, ..loc }),
                None => c.detach(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Graph, Operation, TensorData};

    /// x → Relu(a) → Neg(b) → Abs(c) → y, with an Add of an initializer in the middle.
    fn chain() -> Graph {
        let mut g = Graph::new("g");
        let names = ["x", "a", "b", "c", "y"];
        let v: Vec<_> = names.iter().map(|n| g.ensure_variable(n)).collect();
        let k = g.add_initializer("k", TensorData::from_vec(vec![1], &[2.0f32]).unwrap()).unwrap();
        g.add_graph_input(v[0]).unwrap();
        g.add_operation(Operation::new("Relu", "r"), &[Some(v[0])], &[Some(v[1])]).unwrap();
        g.add_operation(Operation::new("Add", "add"), &[Some(v[1]), Some(k)], &[Some(v[2])]).unwrap();
        g.add_operation(Operation::new("Neg", "n"), &[Some(v[2])], &[Some(v[3])]).unwrap();
        g.add_operation(Operation::new("Abs", "abs"), &[Some(v[3])], &[Some(v[4])]).unwrap();
        g.add_graph_output(v[4]).unwrap();
        g
    }

    #[test]
    fn the_block_between_two_cuts_keeps_names_and_initializers() {
        let g = chain();
        let id = |n: &str| g.var_id(n).unwrap();
        let block = g.extract(&[id("a")], &[id("c")]).unwrap();
        let types: Vec<_> = block.operations().map(|(_, o)| o.op_type.as_str()).collect();
        assert_eq!(types, ["Add", "Neg"]);
        assert_eq!(block.var_name(block.inputs()[0]), "a");
        assert_eq!(block.var_name(block.outputs()[0]), "c");
        assert!(block.variable(block.var_id("k").unwrap()).unwrap().is_parameter());
    }

    #[test]
    fn an_incomplete_cut_names_what_is_missing() {
        let g = chain();
        let err = g.extract(&[], &[g.var_id("c").unwrap()]).unwrap_err().to_string();
        assert!(err.contains("`x`") && err.contains("cut input"), "{err}");
    }
}
