//! Structural validation: every read value is defined, outputs are defined, no cycles.

use crate::attribute::Attribute;
use crate::error::{IrError, Result};
use crate::graph::Graph;
use std::collections::HashSet;

impl Graph {
    /// Checks the graph is well formed. `outer` holds the names visible from enclosing scopes
    /// (empty for a model's main graph); sub-graphs are checked recursively.
    pub fn validate(&self, outer: &HashSet<String>) -> Result<()> {
        for (id, v) in self.variables() {
            let defined = v.producer.is_some() || v.value.is_some() || self.inputs.contains(&id);
            if defined || outer.contains(&v.name) {
                continue;
            }
            if let Some(c) = v.consumers.first() {
                let op = self.operation(*c)?;
                return Err(IrError::DanglingInput { op: op.name.clone(), name: v.name.clone() });
            }
            if self.outputs.contains(&id) {
                return Err(IrError::DanglingOutput(v.name.clone()));
            }
        }
        self.topological_order()?;
        let mut scope: Option<HashSet<String>> = None;
        for (_, op) in self.operations() {
            for attr in op.attributes.values() {
                let graphs: Vec<&Graph> = match attr {
                    Attribute::Graph(g) => vec![g.as_ref()],
                    Attribute::Graphs(gs) => gs.iter().collect(),
                    _ => continue,
                };
                // Sub-graphs see every name of this graph and of the scopes around it.
                let scope = scope.get_or_insert_with(|| {
                    let mut s = outer.clone();
                    s.extend(self.variables().map(|(_, v)| v.name.clone()));
                    s
                });
                for g in graphs {
                    g.validate(scope)?;
                }
            }
        }
        Ok(())
    }
}
