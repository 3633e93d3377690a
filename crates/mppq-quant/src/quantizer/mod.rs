//! Quantizers: for each operation a dispatcher sent to their precision, a quantizer decides how
//! each input and output is quantized (bits, range, symmetry, granularity, observer). One
//! quantizer per module; [`quantizer_by_name`] is the table of built-in ones.

mod fp8;
pub mod layout;
mod lowbit;
mod onnxruntime;
pub mod op_types;
pub mod target_cpu;
mod trt;
mod weight_only;

pub use fp8::{Fp8Format, Fp8Quantizer};
pub use lowbit::LowBitQuantizer;
pub use onnxruntime::OnnxRuntimeQuantizer;
pub use target_cpu::{IntegerArithmetic, TargetCpu};
pub use trt::TensorRtQuantizer;
pub use weight_only::WeightOnlyQuantizer;

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

/// Names of the built-in quantizers ([`quantizer_by_name`] also accepts `onnxruntime` for
/// `default`).
pub const QUANTIZER_NAMES: [&str; 6] = ["default", "trt-int8", "lowbit", "fp8-e4m3", "fp8-e5m2", "weight-only"];

/// Built-in quantizers by name, with their default settings (`lowbit`: 4-bit weights, 8-bit
/// activations).
pub fn quantizer_by_name(name: &str) -> Result<Box<dyn Quantizer>> {
    match name {
        "default" | "onnxruntime" => Ok(Box::new(OnnxRuntimeQuantizer::default())),
        "trt-int8" => Ok(Box::new(TensorRtQuantizer::default())),
        "lowbit" => Ok(Box::new(LowBitQuantizer::default())),
        "fp8-e4m3" => Ok(Box::new(Fp8Quantizer::new(Fp8Format::E4M3))),
        "fp8-e5m2" => Ok(Box::new(Fp8Quantizer::new(Fp8Format::E5M2))),
        "weight-only" => Ok(Box::new(WeightOnlyQuantizer::default())),
        _ => Err(QuantError::UnknownQuantizer { name: name.to_string(), known: QUANTIZER_NAMES.to_vec() }),
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
            return Err(QuantError::UndeclaredType {
                quantizer: quantizer.name().to_string(),
                op: op.name.clone(),
                op_type: op.op_type.clone(),
                precision: target.to_string(),
            });
        }
        let config = quantizer.init_quantize_config(graph, *id)?;
        graph.operation_mut(*id)?.quant_config = Some(config);
    }
    Ok(ops.len())
}
