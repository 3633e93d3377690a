//! What a dispatcher is told: the quantized precision to use, the op types the platform's
//! quantizer can quantize, and the user's ignored scope.

use crate::error::DispatchError;
use mppq_ir::quant::TargetPrecision;
use mppq_ir::{Graph, OpId, VarId};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// Inputs of [`crate::Dispatcher::dispatch`] besides the graph.
#[derive(Clone, Debug)]
pub struct DispatchContext {
    /// The precision given to quantized operations (must satisfy `is_quantized`).
    pub precision: TargetPrecision,
    /// Op types (`op_type`, domain ignored) the platform's quantizer can quantize. No
    /// dispatcher assigns a quantized precision to an op of another type.
    pub quantable_types: BTreeSet<String>,
    /// Operations forced to FP32 by the user.
    pub ignored: IgnoredScope,
}

impl DispatchContext {
    pub fn new<I, S>(precision: TargetPrecision, quantable_types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            precision,
            quantable_types: quantable_types.into_iter().map(Into::into).collect(),
            ignored: IgnoredScope::default(),
        }
    }

    pub fn with_ignored(mut self, ignored: IgnoredScope) -> Self {
        self.ignored = ignored;
        self
    }

    /// Whether the quantizer declares this op type.
    pub fn declares(&self, op_type: &str) -> bool {
        self.quantable_types.contains(op_type)
    }
}

/// A bounded sub-graph: every operation on a path from one of `inputs` to one of `outputs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubgraphScope {
    /// Variable names where the sub-graph starts (their consumers are inside).
    pub inputs: Vec<String>,
    /// Variable names where it ends (their producers are inside).
    pub outputs: Vec<String>,
}

/// Operations the user keeps in FP32, whatever the dispatcher decides. Shape-or-index
/// operations inside the scope stay SOI (they are never quantized anyway).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IgnoredScope {
    /// Exact op types, e.g. `Softmax`.
    pub types: Vec<String>,
    /// Op names; `*` matches any run of characters and `?` any one character.
    pub names: Vec<String>,
    /// Bounded sub-graphs.
    pub subgraphs: Vec<SubgraphScope>,
}

impl IgnoredScope {
    pub fn with_type(mut self, op_type: impl Into<String>) -> Self {
        self.types.push(op_type.into());
        self
    }

    pub fn with_name(mut self, pattern: impl Into<String>) -> Self {
        self.names.push(pattern.into());
        self
    }

    pub fn with_subgraph<I, O, S, T>(mut self, inputs: I, outputs: O) -> Self
    where
        I: IntoIterator<Item = S>,
        O: IntoIterator<Item = T>,
        S: Into<String>,
        T: Into<String>,
    {
        self.subgraphs.push(SubgraphScope {
            inputs: inputs.into_iter().map(Into::into).collect(),
            outputs: outputs.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// The user's `--ignore` items. An item names operations by type or by name (a glob, or an
    /// exact name): it matches an operation either way ([`IgnoredScope::item_matches`]), so a
    /// bare `conv1` ignores the operation named so, and `Softmax` every Softmax.
    pub fn from_items(items: &[String]) -> Self {
        items.iter().fold(Self::default(), |scope, item| {
            let scope = if item.contains(['*', '?']) { scope } else { scope.with_type(item.clone()) };
            scope.with_name(item.clone())
        })
    }

    /// Whether an `--ignore` item matches an operation of this type and name.
    pub fn item_matches(item: &str, op_type: &str, op_name: &str) -> bool {
        item == op_type || glob_match(item, op_name)
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty() && self.names.is_empty() && self.subgraphs.is_empty()
    }

    /// The ignored operations of `graph`, each with the reason (`ignored scope: ...`).
    pub fn resolve(&self, graph: &Graph) -> Result<HashMap<OpId, String>, DispatchError> {
        let mut out = HashMap::new();
        for (id, op) in graph.operations() {
            if self.types.iter().any(|t| t == &op.op_type) {
                out.insert(id, format!("ignored scope: type {}", op.op_type));
            } else if let Some(p) = self.names.iter().find(|p| glob_match(p, &op.name)) {
                out.insert(id, format!("ignored scope: name matches `{p}`"));
            }
        }
        for sg in &self.subgraphs {
            let label = format!("ignored scope: sub-graph [{}] -> [{}]", sg.inputs.join(", "), sg.outputs.join(", "));
            for id in subgraph_ops(graph, sg)? {
                out.entry(id).or_insert_with(|| label.clone());
            }
        }
        Ok(out)
    }
}

fn var_ids(graph: &Graph, names: &[String]) -> Result<Vec<VarId>, DispatchError> {
    names.iter().map(|n| graph.var_id(n).ok_or_else(|| DispatchError::UnknownScopeVariable(n.clone()))).collect()
}

/// Operations downstream of some start variable and upstream of some end variable.
fn subgraph_ops(graph: &Graph, sg: &SubgraphScope) -> Result<HashSet<OpId>, DispatchError> {
    let starts = var_ids(graph, &sg.inputs)?;
    let ends = var_ids(graph, &sg.outputs)?;
    let mut below: HashSet<OpId> = HashSet::new();
    let mut queue: VecDeque<OpId> = starts.iter().flat_map(|v| graph.consumers(*v).iter().copied()).collect();
    while let Some(op) = queue.pop_front() {
        if below.insert(op) {
            // Do not walk past an end variable.
            let stops = graph.operation(op).map(|o| o.output_ids().all(|v| ends.contains(&v))).unwrap_or(true);
            if !stops {
                queue.extend(graph.downstream(op));
            }
        }
    }
    let mut above: HashSet<OpId> = HashSet::new();
    let mut queue: VecDeque<OpId> = ends.iter().filter_map(|v| graph.producer(*v)).collect();
    while let Some(op) = queue.pop_front() {
        if !below.contains(&op) || !above.insert(op) {
            continue;
        }
        if let Ok(o) = graph.operation(op) {
            for v in o.input_ids() {
                if starts.contains(&v) {
                    continue;
                }
                if let Some(p) = graph.producer(v) {
                    queue.push_back(p);
                }
            }
        }
    }
    Ok(above)
}

/// Glob match with `*` (any run) and `?` (one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("blocks.0.*", "blocks.0.attn.q.matmul"));
        assert!(!glob_match("blocks.0.*", "blocks.1.attn"));
        assert!(glob_match("conv?", "conv1"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }
}
