//! The operator registry: which kernel implements which ONNX operator at which opset. Built-in
//! operators register themselves from their own files ([`crate::ops`]); users add or override
//! operators (for a platform) with [`OpRegistry::register`], from outside this crate.

use crate::device::Device;
use crate::error::{ExecError, Result};
use crate::value::Value;
use mppq_ir::Operation;
use std::collections::HashMap;
use std::sync::Arc;

/// A prepared operator: attributes parsed, ready to run many times.
pub trait Kernel: Send + Sync {
    /// Computes the outputs from the inputs (omitted optional inputs are `None`). Returns one
    /// entry per output slot of the node.
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>>;

    /// Whether this kernel takes tensors of the low-precision types (FP8, FP4, E8M0, 4/2-bit
    /// ints), which are held as F32/I32 stand-ins ([`crate::tensor`]). Say yes only for a kernel
    /// that converts them on purpose (Cast, QuantizeLinear/DequantizeLinear) or moves them
    /// without computing on their values (Identity, Reshape, Transpose, Shape): the engine
    /// refuses such inputs to every other kernel with [`ExecError::NotImplemented`], so that no
    /// arithmetic silently runs in the stand-in's type.
    fn handles_low_precision(&self) -> bool {
        false
    }
}

/// What a kernel builder sees: the node, the opset it is read under, the device and the
/// registry (for operators with sub-graphs).
pub struct OpNode<'a> {
    pub op: &'a Operation,
    pub opset: i64,
    pub device: &'a Device,
    pub registry: &'a OpRegistry,
}

impl OpNode<'_> {
    /// The node's name for messages (or its type when unnamed).
    pub fn label(&self) -> &str {
        if self.op.name.is_empty() { &self.op.op_type } else { &self.op.name }
    }

    /// An error about this node.
    pub fn err(&self, message: impl Into<String>) -> ExecError {
        ExecError::Op { node: self.label().to_string(), op_type: self.op.op_type.clone(), message: message.into() }
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        self.op.attr_int(name, default).map_err(|e| self.err(e.to_string()))
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        self.op.attr_float(name, default).map_err(|e| self.err(e.to_string()))
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        self.op.attr_string(name, default).map_err(|e| self.err(e.to_string()))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        self.op.attr_ints(name).map_err(|e| self.err(e.to_string()))
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        self.op
            .attr(name)
            .map(|a| a.as_floats(name).map(<[f32]>::to_vec))
            .transpose()
            .map_err(|e| self.err(e.to_string()))
    }

    pub fn has(&self, name: &str) -> bool {
        self.op.attributes.contains_key(name)
    }
}

/// What a kernel sees while running.
pub struct KernelContext<'a> {
    pub device: &'a Device,
    pub node: &'a str,
    pub op_type: &'a str,
    /// Values of enclosing scopes that this node's sub-graphs read by name.
    pub captured: &'a HashMap<String, Value>,
}

impl KernelContext<'_> {
    pub fn err(&self, message: impl Into<String>) -> ExecError {
        ExecError::Op { node: self.node.to_string(), op_type: self.op_type.to_string(), message: message.into() }
    }

    /// A run-time "this mode is not implemented" error (counted as unsupported, not wrong).
    pub fn not_implemented(&self, feature: impl Into<String>) -> ExecError {
        ExecError::NotImplemented {
            node: self.node.to_string(),
            op_type: self.op_type.to_string(),
            feature: feature.into(),
        }
    }

    /// Input helper naming this node in its errors.
    pub fn inputs(&self, values: Vec<Option<Value>>) -> crate::value::Inputs<'_> {
        crate::value::Inputs::new(values, self.node, self.op_type)
    }
}

/// Builds a kernel for a node (parses and checks attributes).
pub type KernelBuilder = Arc<dyn Fn(&OpNode<'_>) -> Result<Box<dyn Kernel>> + Send + Sync>;

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

    /// Every built-in operator.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        crate::ops::register_all(&mut r);
        r
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
