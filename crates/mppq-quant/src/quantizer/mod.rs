//! Quantizers: for each operation a dispatcher sent to their precision, a quantizer decides how
//! each input and output is quantized (bits, range, symmetry, granularity, observer). One
//! quantizer per module; [`quantizer_by_name`] is the table of built-in ones.

mod onnxruntime;

pub use onnxruntime::OnnxRuntimeQuantizer;

use crate::error::{QuantError, Result};
use mppq_ir::quant::{OperationQuantConfig, TargetPrecision};
use mppq_ir::{Graph, OpId};

/// The seeds' quantizer contract.
pub trait Quantizer: Send + Sync {
    fn name(&self) -> &str;
    /// The precision operations must be dispatched to for this quantizer to configure them.
    fn target_precision(&self) -> TargetPrecision;
    /// Operation types this quantizer can configure; dispatchers must not send it others.
    fn quant_operation_types(&self) -> Vec<&'static str>;
    /// The configs of one operation (one slot per input and output; `None` = not quantized).
    fn init_quantize_config(&self, graph: &Graph, op: OpId) -> Result<OperationQuantConfig>;
}

/// Built-in quantizers by name.
pub fn quantizer_by_name(name: &str) -> Result<Box<dyn Quantizer>> {
    match name {
        "default" | "onnxruntime" => Ok(Box::new(OnnxRuntimeQuantizer::default())),
        _ => Err(QuantError::InvalidOption { observer: "quantizer".into(), message: format!("unknown quantizer `{name}` (known: default)") }),
    }
}

/// Gives every operation dispatched to the quantizer's precision its configs; returns how many.
/// An operation of a type the quantizer does not declare is an error (a dispatcher bug).
pub fn init_quantization(graph: &mut Graph, quantizer: &dyn Quantizer) -> Result<usize> {
    let target = quantizer.target_precision();
    let types = quantizer.quant_operation_types();
    let ops: Vec<OpId> = graph.operations().filter(|(_, op)| op.precision == target).map(|(id, _)| id).collect();
    for id in &ops {
        let op = graph.operation(*id)?;
        if !types.contains(&op.op_type.as_str()) {
            return Err(QuantError::InvalidOption {
                observer: quantizer.name().to_string(),
                message: format!("operation `{}` ({}) was dispatched to {target}, but this quantizer does not declare that type", op.name, op.op_type),
            });
        }
        let config = quantizer.init_quantize_config(graph, *id)?;
        graph.operation_mut(*id)?.quant_config = Some(config);
    }
    Ok(ops.len())
}
