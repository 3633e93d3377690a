//! The kernel contract: what an operator implementation is ([`Kernel`]), how it is built from a
//! node ([`KernelBuilder`] over an [`OpNode`]) and what it sees while running ([`KernelContext`]).
//! Operators implement it; the registry ([`crate::registry`]) only maps node types to builders.

use crate::device::Device;
use crate::engine::Executor;
use crate::error::{ExecError, Result};
use crate::hooks::ExecHook;
use crate::registry::OpRegistry;
use crate::value::Value;
use mppq_ir::Operation;
use std::cell::RefCell;
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
    /// The hooks of this run for each sub-graph attribute of the node (see
    /// [`ExecHook::enter_subgraph`]); [`KernelContext::run_subgraph`] runs a body under them.
    pub subgraph_hooks: SubgraphHooks<'a>,
    /// Set when a hook handed the operation integer codes instead of values
    /// ([`ExecHook::integer_codes`]).
    pub integer_codes: Option<IntegerCodes>,
}

/// How the inputs of an operation hold integer codes (the quantization simulation's integer
/// path): input 0 centred activation codes (`q − z` as float32) that `input_offset` brings into
/// 0..=255, the weight and bias their integer codes. A kernel that knows it may compute the
/// exact integer product; its result is the same accumulator either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegerCodes {
    pub input_offset: u8,
}

/// Hooks for the sub-graphs of one node, by attribute name.
pub type SubgraphHooks<'a> = RefCell<Vec<(String, Box<dyn ExecHook + 'a>)>>;

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

    /// Runs sub-graph `attr` (an executor built from it) with this run's hooks for it, so that
    /// observers and quantization simulation see inside If branches and loop bodies.
    pub fn run_subgraph(
        &self,
        attr: &str,
        body: &Executor,
        feeds: Vec<(String, Value)>,
        wanted: &[String],
    ) -> Result<Vec<(String, Value)>> {
        let mut hooks = self.subgraph_hooks.borrow_mut();
        let mut chosen: Vec<&mut dyn ExecHook> =
            hooks.iter_mut().filter(|(a, _)| a == attr).map(|(_, h)| &mut **h as &mut dyn ExecHook).collect();
        for hook in chosen.iter_mut() {
            hook.subgraph_feeds(&feeds, self.captured);
        }
        body.run_scoped(feeds, wanted, self.captured, &mut chosen)
    }

    /// Input helper naming this node in its errors.
    pub fn inputs(&self, values: Vec<Option<Value>>) -> crate::value::Inputs<'_> {
        crate::value::Inputs::new(values, self.node, self.op_type)
    }
}

/// Builds a kernel for a node (parses and checks attributes).
pub type KernelBuilder = Arc<dyn Fn(&OpNode<'_>) -> Result<Box<dyn Kernel>> + Send + Sync>;
