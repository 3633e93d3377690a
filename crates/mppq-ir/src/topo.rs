//! Topological order of operations, including the implicit dependencies that control-flow
//! sub-graphs create by reading enclosing-scope variables, and cycle reports.

use crate::attribute::Attribute;
use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId, VarId};
use petgraph::graph::DiGraph;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

impl Graph {
    /// Names this graph reads from enclosing scopes, its nested sub-graphs' included.
    pub fn captured_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut push = |n: &str| {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        };
        for (id, v) in self.variables() {
            let defined = v.producer.is_some() || v.value.is_some() || self.inputs.contains(&id);
            if !defined && (!v.consumers.is_empty() || self.outputs.contains(&id)) {
                push(&v.name);
            }
        }
        for (_, op) in self.operations() {
            for name in subgraph_captures(op.attributes.values()) {
                let defined = self.var_id(&name).is_some_and(|id| {
                    let v = &self.variables[&id];
                    v.producer.is_some() || v.value.is_some() || self.inputs.contains(&id)
                });
                if !defined {
                    push(&name);
                }
            }
        }
        names
    }

    /// Names the sub-graphs of this graph's operations read from it (or from further out): a
    /// value read this way has readers that its consumer list does not show.
    pub fn names_read_by_subgraphs(&self) -> std::collections::HashSet<String> {
        self.operations().flat_map(|(_, op)| subgraph_captures(op.attributes.values())).collect()
    }

    /// Variables of this graph that `op`'s sub-graphs read by name (not through its inputs).
    pub fn implicit_inputs(&self, op: OpId) -> Vec<VarId> {
        self.implicit_input_names(op).into_iter().filter_map(|n| self.var_id(&n)).collect()
    }

    /// Names `op`'s sub-graphs read from enclosing scopes, whether this graph defines them or
    /// an outer one does.
    pub fn implicit_input_names(&self, op: OpId) -> Vec<String> {
        let Ok(operation) = self.operation(op) else { return Vec::new() };
        subgraph_captures(operation.attributes.values())
    }

    /// Operations in an order where every operation comes after the producers of all it reads.
    /// Among ready operations the earlier-inserted goes first, so a valid file order is kept.
    /// A cycle is an error that lists the operations on it.
    pub fn topological_order(&self) -> Result<Vec<OpId>> {
        let position: HashMap<OpId, usize> = self.operations.keys().enumerate().map(|(i, id)| (*id, i)).collect();
        let ids: Vec<OpId> = self.operations.keys().copied().collect();
        let mut indegree = vec![0usize; ids.len()];
        let mut successors: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
        for (i, id) in ids.iter().enumerate() {
            let mut preds: HashSet<usize> = HashSet::new();
            let op = &self.operations[id];
            for v in op.input_ids().chain(self.implicit_inputs(*id)) {
                if let Some(p) = self.producer(v).and_then(|p| position.get(&p)) {
                    preds.insert(*p);
                }
            }
            indegree[i] = preds.len();
            for p in preds {
                successors[p].push(i);
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = (0..ids.len()).filter(|i| indegree[*i] == 0).map(Reverse).collect();
        let mut order = Vec::with_capacity(ids.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(ids[i]);
            for &s in &successors[i] {
                indegree[s] -= 1;
                if indegree[s] == 0 {
                    ready.push(Reverse(s));
                }
            }
        }
        if order.len() == ids.len() {
            return Ok(order);
        }
        Err(IrError::Cycle { cycle: self.find_cycle(&ids, &successors, &indegree) })
    }

    /// Names of the operations on one cycle among those Kahn's algorithm could not order.
    fn find_cycle(&self, ids: &[OpId], successors: &[Vec<usize>], indegree: &[usize]) -> Vec<String> {
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let stuck: Vec<usize> = (0..ids.len()).filter(|i| indegree[*i] > 0).collect();
        let nodes: HashMap<usize, _> = stuck.iter().map(|i| (*i, g.add_node(*i))).collect();
        for &i in &stuck {
            for s in &successors[i] {
                if let Some(&t) = nodes.get(s) {
                    g.add_edge(nodes[&i], t, ());
                }
            }
        }
        let name = |i: usize| {
            let op = &self.operations[&ids[i]];
            if op.name.is_empty() {
                format!("#{} ({})", ids[i].0, op.op_type)
            } else {
                format!("{} ({})", op.name, op.op_type)
            }
        };
        // A strongly connected component with more than one node (or a self loop) is a cycle;
        // walk it to print the operations in cycle order.
        for scc in petgraph::algo::tarjan_scc(&g) {
            let members: HashSet<_> = scc.iter().copied().collect();
            let start = scc[0];
            let self_loop = g.contains_edge(start, start);
            if scc.len() < 2 && !self_loop {
                continue;
            }
            let mut path = vec![g[start]];
            let mut seen = HashSet::from([start]);
            let mut cur = start;
            while let Some(next) = g.neighbors(cur).find(|n| members.contains(n)) {
                if !seen.insert(next) {
                    path.push(g[next]);
                    break;
                }
                path.push(g[next]);
                cur = next;
            }
            return path.into_iter().map(name).collect();
        }
        stuck.into_iter().map(name).collect()
    }
}

fn subgraph_captures<'a>(attrs: impl Iterator<Item = &'a Attribute>) -> Vec<String> {
    let mut names = Vec::new();
    for attr in attrs {
        let graphs: Vec<&Graph> = match attr {
            Attribute::Graph(g) => vec![g.as_ref()],
            Attribute::Graphs(gs) => gs.iter().collect(),
            _ => continue,
        };
        for g in graphs {
            for n in g.captured_names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use crate::graph::{Graph, Operation};

    #[test]
    fn cycle_error_prints_the_cycle() {
        let mut g = Graph::new("g");
        let a = g.ensure_variable("a");
        let b = g.ensure_variable("b");
        let c = g.ensure_variable("c");
        let x = g.ensure_variable("x");
        g.add_graph_input(x).unwrap();
        g.add_operation(Operation::new("Add", "first"), &[Some(x), Some(c)], &[Some(a)]).unwrap();
        g.add_operation(Operation::new("Relu", "second"), &[Some(a)], &[Some(b)]).unwrap();
        g.add_operation(Operation::new("Relu", "third"), &[Some(b)], &[Some(c)]).unwrap();
        let err = g.topological_order().unwrap_err().to_string();
        assert!(err.contains("cycle"), "{err}");
        for n in ["first", "second", "third"] {
            assert!(err.contains(n), "{err}");
        }
    }

    #[test]
    fn order_respects_dependencies_over_insertion() {
        let mut g = Graph::new("g");
        let x = g.ensure_variable("x");
        let y = g.ensure_variable("y");
        let z = g.ensure_variable("z");
        g.add_graph_input(x).unwrap();
        let late = g.add_operation(Operation::new("Relu", "late"), &[Some(y)], &[Some(z)]).unwrap();
        let early = g.add_operation(Operation::new("Relu", "early"), &[Some(x)], &[Some(y)]).unwrap();
        assert_eq!(g.topological_order().unwrap(), vec![early, late]);
    }
}
