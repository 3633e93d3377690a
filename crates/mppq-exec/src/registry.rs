//! The operator registry: which kernel implements which ONNX operator at which opset. Built-in
//! operators register themselves from their own files ([`crate::ops`]); users add or override
//! operators (for a platform) with [`OpRegistry::register`], from outside this crate.

// The kernel contract lives in `crate::kernel`; its old paths (`registry::Kernel`, ...) still work.
pub use crate::kernel::{Kernel, KernelBuilder, KernelContext, OpNode};

use crate::error::{ExecError, Result};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone)]
struct OpDef {
    since: i64,
    builder: KernelBuilder,
}

/// Operator table: (domain, op type) → implementations by first opset.
#[derive(Clone, Default)]
pub struct OpRegistry {
    defs: HashMap<(String, String), Vec<OpDef>>,
    /// Registrations that replaced an earlier one (overrides), as `domain::type@since`.
    replaced: Vec<String>,
}

fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" { "" } else { domain }
}

impl OpRegistry {
    /// An empty table (build a platform from scratch).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Registers `builder` for `op_type` in `domain` from opset `since` on. A later registration
    /// for the same (domain, op type, since) replaces the earlier one: that is how a platform
    /// overrides a built-in operator.
    pub fn register(&mut self, domain: &str, op_type: &str, since: i64, builder: KernelBuilder) {
        let defs = self.defs.entry((canonical_domain(domain).to_string(), op_type.to_string())).or_default();
        if defs.iter().any(|d| d.since == since) {
            self.replaced.push(format!("{domain}::{op_type}@{since}"));
        }
        defs.retain(|d| d.since != since);
        defs.push(OpDef { since, builder });
        defs.sort_by_key(|d| d.since);
    }

    /// Registers a plain function as the builder of a default-domain operator.
    pub fn register_fn(&mut self, op_type: &str, since: i64, build: fn(&OpNode<'_>) -> Result<Box<dyn Kernel>>) {
        self.register("", op_type, since, Arc::new(build));
    }

    fn find(&self, domain: &str, op_type: &str, opset: i64) -> Option<&OpDef> {
        let defs = self.defs.get(&(canonical_domain(domain).to_string(), op_type.to_string()))?;
        // Opset 0 means "unknown"; take the newest implementation then.
        defs.iter().rev().find(|d| opset == 0 || d.since <= opset)
    }

    /// Registrations that replaced an earlier one for the same (domain, type, since).
    pub fn overrides(&self) -> &[String] {
        &self.replaced
    }

    pub fn supports(&self, domain: &str, op_type: &str, opset: i64) -> bool {
        self.find(domain, op_type, opset).is_some()
    }

    /// All (domain, op type) pairs with an implementation, sorted.
    pub fn op_types(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = self.defs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Builds the kernel for a node, or says precisely why it cannot.
    pub fn build(&self, node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
        let op = node.op;
        match self.find(&op.domain, &op.op_type, node.opset) {
            Some(def) => (def.builder)(node),
            None => {
                let key = (canonical_domain(&op.domain).to_string(), op.op_type.clone());
                let hint = match self.defs.get(&key).and_then(|d| d.first()) {
                    Some(d) => format!(" (implemented from opset {} on)", d.since),
                    None => String::new(),
                };
                Err(ExecError::Unsupported {
                    op_type: op.op_type.clone(),
                    domain: if op.domain.is_empty() { "ai.onnx".into() } else { op.domain.clone() },
                    opset: node.opset,
                    node: node.label().to_string(),
                    hint,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_operator_is_registered_once() {
        let r = super::OpRegistry::builtin();
        assert!(r.overrides().is_empty(), "operators registered twice: {:?}", r.overrides());
        println!("{} built-in operator types", r.op_types().len());
        assert!(r.op_types().len() >= 150, "{} operator types", r.op_types().len());
    }
}
