//! Execution hooks: code the engine runs before and after each operation (observers, analysis,
//! quantization simulation, which is one such hook: [`crate::simulation::QuantSimulation`]).

use crate::error::Result;
use crate::kernel::IntegerCodes;
use crate::value::Value;
use mppq_ir::OpId;
use mppq_ir::quant::ConfigSide;
use std::collections::HashMap;

/// Identifies the operation a hook is called for.
pub struct OpInfo<'a> {
    pub id: OpId,
    pub name: &'a str,
    pub op_type: &'a str,
}

/// Called around every executed operation; may inspect or replace values.
pub trait ExecHook {
    fn before_op(&mut self, _op: &OpInfo<'_>, _inputs: &mut [Option<Value>]) -> Result<()> {
        Ok(())
    }
    fn after_op(&mut self, _op: &OpInfo<'_>, _outputs: &mut [Option<Value>]) -> Result<()> {
        Ok(())
    }
    /// The hook to run inside sub-graph `attr` of `op` (If branches, Loop and Scan bodies), whose
    /// operations have ids of their own graph: `None` leaves the sub-graph unhooked.
    fn enter_subgraph(&self, _op: &OpInfo<'_>, _attr: &str) -> Option<Box<dyn ExecHook + '_>> {
        None
    }
    /// On a hook [`Self::enter_subgraph`] gave: the values one run of the sub-graph starts from
    /// (a loop iteration's formal inputs) and the enclosing-scope values it can read, before it
    /// runs.
    fn subgraph_feeds(&mut self, _feeds: &[(String, Value)], _captured: &HashMap<String, Value>) {}
    /// After [`Self::before_op`]: whether the hook turned the operation's inputs into integer
    /// codes, which the kernel may then compute on exactly ([`IntegerCodes`]).
    fn integer_codes(&self, _op: &OpInfo<'_>) -> Option<IntegerCodes> {
        None
    }
}

/// Looks at values without changing them: every input of an operation before it runs and every
/// output after, by slot. Observers and statistics collectors implement this, and [`Tap`] turns
/// one into an [`ExecHook`].
pub trait TensorTap {
    /// Sees one present value: input or output `slot` of operation `op`.
    fn tap(&mut self, op: OpId, side: ConfigSide, slot: usize, value: &Value);
}

/// An [`ExecHook`] that shows every input and output to a [`TensorTap`].
pub struct Tap<T>(pub T);

impl<T: TensorTap> ExecHook for Tap<T> {
    fn before_op(&mut self, op: &OpInfo<'_>, inputs: &mut [Option<Value>]) -> Result<()> {
        for (slot, v) in inputs.iter().enumerate() {
            if let Some(v) = v {
                self.0.tap(op.id, ConfigSide::Input, slot, v);
            }
        }
        Ok(())
    }
    fn after_op(&mut self, op: &OpInfo<'_>, outputs: &mut [Option<Value>]) -> Result<()> {
        for (slot, v) in outputs.iter().enumerate() {
            if let Some(v) = v {
                self.0.tap(op.id, ConfigSide::Output, slot, v);
            }
        }
        Ok(())
    }
}
