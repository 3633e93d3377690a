//! The result of dispatching: per operation a precision and the reason for it.

use mppq_ir::quant::TargetPrecision;
use mppq_ir::{Graph, IrError, OpId};
use std::collections::BTreeMap;
use std::fmt;

/// The decision for one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub op_name: String,
    pub op_type: String,
    pub precision: TargetPrecision,
    /// Which rule put the operation there, in words.
    pub reason: String,
}

/// A dispatch: one [`Decision`] per operation of the graph, in id (insertion) order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dispatch {
    /// Name of the dispatcher that made it.
    pub dispatcher: String,
    decisions: BTreeMap<OpId, Decision>,
}

impl Dispatch {
    pub fn new(dispatcher: impl Into<String>) -> Self {
        Self { dispatcher: dispatcher.into(), decisions: BTreeMap::new() }
    }

    /// Records (or replaces) the decision for `op`.
    pub fn insert(&mut self, op: OpId, decision: Decision) {
        self.decisions.insert(op, decision);
    }

    pub fn get(&self, op: OpId) -> Option<&Decision> {
        self.decisions.get(&op)
    }

    pub fn precision(&self, op: OpId) -> Option<TargetPrecision> {
        self.decisions.get(&op).map(|d| d.precision)
    }

    /// The decision for the operation named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Decision> {
        self.decisions.values().find(|d| d.op_name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (OpId, &Decision)> {
        self.decisions.iter().map(|(k, v)| (*k, v))
    }

    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }

    /// Sets `precision` on every operation of `graph` this dispatch decided. Fails, changing
    /// nothing, if the dispatch names an operation the graph no longer has.
    pub fn apply(&self, graph: &mut Graph) -> Result<(), IrError> {
        for op in self.decisions.keys() {
            graph.operation(*op)?;
        }
        for (op, d) in &self.decisions {
            graph.operation_mut(*op)?.precision = d.precision;
        }
        Ok(())
    }
}

impl fmt::Display for Dispatch {
    /// A table: operation, type, precision, reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w_name = self.decisions.values().map(|d| d.op_name.len()).chain([9]).max().unwrap_or(9);
        let w_type = self.decisions.values().map(|d| d.op_type.len()).chain([4]).max().unwrap_or(4);
        writeln!(f, "{:<w_name$}  {:<w_type$}  {:<9}  reason", "operation", "type", "precision")?;
        for d in self.decisions.values() {
            writeln!(f, "{:<w_name$}  {:<w_type$}  {:<9}  {}", d.op_name, d.op_type, d.precision.name(), d.reason)?;
        }
        Ok(())
    }
}
