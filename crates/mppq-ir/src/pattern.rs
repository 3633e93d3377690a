//! Pattern search: find chains and trees of operations (e.g. Conv → BatchNormalization → Relu)
//! whose links follow producer → consumer edges, with op-type lists or arbitrary predicates.

use crate::graph::{Graph, OpId, Operation};
use std::sync::Arc;

type Predicate = Arc<dyn Fn(&Graph, OpId, &Operation) -> bool + Send + Sync>;

/// One node of a pattern tree: a matcher plus the patterns its consumers must match.
#[derive(Clone)]
pub struct Pattern {
    matcher: Predicate,
    followers: Vec<Pattern>,
    /// Require the matched op's outputs to feed only the matched followers (safe to fuse).
    exclusive: bool,
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pattern").field("followers", &self.followers.len()).finish()
    }
}

impl Pattern {
    /// Matches operations whose type is one of `types` (default domain or any domain).
    pub fn op_type(types: &[&str]) -> Self {
        let types: Vec<String> = types.iter().map(|s| s.to_string()).collect();
        Self::predicate(move |_, _, op| types.contains(&op.op_type))
    }

    /// Matches operations for which `f` returns true.
    pub fn predicate(f: impl Fn(&Graph, OpId, &Operation) -> bool + Send + Sync + 'static) -> Self {
        Self { matcher: Arc::new(f), followers: Vec::new(), exclusive: false }
    }

    /// A chain: each pattern consumes an output of the previous one.
    pub fn chain(mut steps: Vec<Pattern>) -> Option<Self> {
        let mut tail = steps.pop()?;
        while let Some(mut prev) = steps.pop() {
            prev.followers.push(tail);
            tail = prev;
        }
        Some(tail)
    }

    /// Adds a follower: some consumer of this op's outputs must match `next`.
    pub fn then(mut self, next: Pattern) -> Self {
        self.followers.push(next);
        self
    }

    /// Additionally require that this op's outputs are read only by its matched followers and
    /// are not graph outputs, so the matched ops can be fused without changing other readers.
    pub fn exclusive(mut self) -> Self {
        self.exclusive = true;
        self
    }

    /// Adds the chain-wide exclusivity to every node but the last of the chain.
    pub fn exclusive_chain(self) -> Self {
        fn mark(p: Pattern) -> Pattern {
            let has_followers = !p.followers.is_empty();
            let mut p = Pattern { followers: p.followers.into_iter().map(mark).collect(), ..p };
            if has_followers {
                p.exclusive = true;
            }
            p
        }
        mark(self)
    }
}

/// One match: the matched operations in pattern pre-order (root first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    pub ops: Vec<OpId>,
}

impl Graph {
    /// All matches of `pattern`, rooted at each operation in insertion order. A match never
    /// uses the same operation twice.
    pub fn find_pattern(&self, pattern: &Pattern) -> Vec<Match> {
        let mut found = Vec::new();
        for (id, _) in self.operations() {
            let mut ops = Vec::new();
            if self.match_at(pattern, id, &mut ops) {
                found.push(Match { ops });
            }
        }
        found
    }

    fn match_at(&self, pattern: &Pattern, id: OpId, ops: &mut Vec<OpId>) -> bool {
        let Ok(op) = self.operation(id) else { return false };
        if ops.contains(&id) || !(pattern.matcher)(self, id, op) {
            return false;
        }
        let mark = ops.len();
        ops.push(id);
        let downstream = self.downstream(id);
        let mut chosen = Vec::new();
        for follower in &pattern.followers {
            let hit = downstream.iter().copied().find(|d| {
                if chosen.contains(d) {
                    return false;
                }
                let before = ops.len();
                if self.match_at(follower, *d, ops) {
                    true
                } else {
                    ops.truncate(before);
                    false
                }
            });
            match hit {
                Some(d) => chosen.push(d),
                None => {
                    ops.truncate(mark);
                    return false;
                }
            }
        }
        if pattern.exclusive {
            let outputs_private = op
                .output_ids()
                .all(|v| !self.is_graph_output(v) && self.consumers(v).iter().all(|c| chosen.contains(c)));
            if !outputs_private {
                ops.truncate(mark);
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv_bn_relu(extra_reader: bool) -> Graph {
        let mut g = Graph::new("g");
        let names = ["x", "c", "b", "r"];
        let v: Vec<_> = names.iter().map(|n| g.ensure_variable(n)).collect();
        g.add_graph_input(v[0]).unwrap();
        g.add_operation(Operation::new("Conv", "conv"), &[Some(v[0])], &[Some(v[1])]).unwrap();
        g.add_operation(Operation::new("BatchNormalization", "bn"), &[Some(v[1])], &[Some(v[2])]).unwrap();
        g.add_operation(Operation::new("Relu", "relu"), &[Some(v[2])], &[Some(v[3])]).unwrap();
        if extra_reader {
            let o = g.ensure_variable("o");
            g.add_operation(Operation::new("Sigmoid", "other"), &[Some(v[1])], &[Some(o)]).unwrap();
        }
        g
    }

    #[test]
    fn finds_a_chain() {
        let g = conv_bn_relu(false);
        let p = Pattern::chain(vec![
            Pattern::op_type(&["Conv", "Gemm"]),
            Pattern::op_type(&["BatchNormalization"]),
            Pattern::op_type(&["Relu", "Clip"]),
        ])
        .unwrap();
        let m = g.find_pattern(&p);
        assert_eq!(m.len(), 1);
        let names: Vec<_> = m[0].ops.iter().map(|id| g.operation(*id).unwrap().name.clone()).collect();
        assert_eq!(names, ["conv", "bn", "relu"]);
    }

    #[test]
    fn exclusive_rejects_shared_outputs() {
        let g = conv_bn_relu(true);
        let p = Pattern::chain(vec![Pattern::op_type(&["Conv"]), Pattern::op_type(&["BatchNormalization"])]).unwrap();
        assert_eq!(g.find_pattern(&p).len(), 1);
        assert_eq!(g.find_pattern(&p.exclusive_chain()).len(), 0);
    }

    #[test]
    fn tree_pattern_with_two_followers() {
        let g = conv_bn_relu(true);
        let p = Pattern::op_type(&["Conv"])
            .then(Pattern::op_type(&["BatchNormalization"]))
            .then(Pattern::op_type(&["Sigmoid"]))
            .exclusive();
        assert_eq!(g.find_pattern(&p).len(), 1);
    }
}
