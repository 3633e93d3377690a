//! Execution hooks: code the engine runs before and after each operation (observers, analysis,
//! quantization simulation, which is one such hook: [`crate::simulation::QuantSimulation`]).

use crate::error::Result;
use crate::value::Value;
use mppq_ir::OpId;

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
}
