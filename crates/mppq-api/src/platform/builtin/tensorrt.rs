//! TensorRT. Three platforms share this file:
//!
//! - `trt-int8`: explicit quantization as TensorRT ≥ 10 wants Q/DQ placed (NVIDIA's "Q/DQ layer
//!   placement" guidance, ModelOpt's and pytorch-quantization's default): Q/DQ on the inputs of
//!   the weighted operations (Conv, ConvTranspose, Gemm, MatMul) and on the residual input of an
//!   Add that follows one, nothing on their outputs (TensorRT fuses the output scale from the next
//!   Q/DQ). int8 symmetric everywhere (zero points 0), per-tensor activations, weights per output
//!   channel; biases stay float (TensorRT quantizes them itself).
//! - `trt-lowbit`: the same placement with the user's bit widths, symmetry and granularity (the
//!   seeds' low-bit extension of the TensorRT target; 4-bit weights are written as INT4 Q/DQ at
//!   opset 21).
//! - `trt-implicit-int8`: every tensor of the quantized operations gets a range (symmetric int8),
//!   as TensorRT ≤ 10's implicit INT8 mode asks of its calibrator; its default export adds the
//!   legacy `calibration.cache`.
//!
//! Written as a user's crate would write platforms: a [`Quantizer`] over the role-table slot
//! kinds, and a [`Platform`] each.

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId, VarId};
use mppq_quant::quantizer::layout::{SlotKind, input_kind};
use mppq_quant::quantizer::{Quantizer, TensorRtQuantizer};

/// `trt-int8`: explicit-quantization QDQ for TensorRT ≥ 10.
pub(crate) struct TensorRt;

impl Platform for TensorRt {
    fn name(&self) -> &str {
        "trt-int8"
    }
    fn description(&self) -> &str {
        "TensorRT >= 10 explicit quantization: int8 symmetric Q/DQ on the inputs of Conv/ConvTranspose/Gemm/MatMul (weights per channel) and on residual Add inputs, zero points 0, outputs and biases float"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut q = ExplicitQuantizer::int8("trt-int8");
        q.observer = o.observer.unwrap_or(q.observer);
        Ok(Box::new(q))
    }
    fn dispatcher(&self) -> &str {
        // The quantizer decides the placement: every operation it declares is offered to it.
        "allin"
    }
    fn exporters(&self) -> Vec<String> {
        ["qdq", "quant-json", "float-onnx", "trt-dynamic-range"].map(String::from).to_vec()
    }
}

/// `trt-lowbit`: TensorRT's Q/DQ placement with the user's bits, symmetry and granularity.
pub(crate) struct TensorRtLowBit;

impl Platform for TensorRtLowBit {
    fn name(&self) -> &str {
        "trt-lowbit"
    }
    fn description(&self) -> &str {
        "TensorRT's Q/DQ placement with chosen bits (2-8; default 4-bit weights, 8-bit activations), symmetry and granularity"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Bits, O::WeightBits, O::PerChannel, O::Symmetric, O::Observer])?;
        let mut q = ExplicitQuantizer::int8("trt-lowbit");
        q.precision = TargetPrecision::LowBit;
        q.activation_bits = o.bits.unwrap_or(8);
        q.weight_bits = o.weight_bits.unwrap_or(4);
        q.weight_per_channel = o.per_channel.unwrap_or(true);
        q.activation_symmetric = o.symmetric.unwrap_or(true);
        q.observer = o.observer.unwrap_or(q.observer);
        for (key, bits) in [("bits", q.activation_bits), ("weight_bits", q.weight_bits)] {
            if !(2..=8).contains(&bits) {
                return Err(crate::error::ApiError::Setting(format!(
                    "platform `trt-lowbit`: {key} = {bits} is outside 2..=8"
                )));
            }
        }
        Ok(Box::new(q))
    }
    fn dispatcher(&self) -> &str {
        // The quantizer decides the placement: every operation it declares is offered to it.
        "allin"
    }
    fn exporters(&self) -> Vec<String> {
        ["qdq", "quant-json", "float-onnx", "trt-dynamic-range"].map(String::from).to_vec()
    }
}

/// `trt-implicit-int8`: a range on every tensor of the quantized operations (TensorRT ≤ 10's
/// implicit INT8 mode reads them from `calibration.cache`).
pub(crate) struct TensorRtImplicit;

impl Platform for TensorRtImplicit {
    fn name(&self) -> &str {
        "trt-implicit-int8"
    }
    fn description(&self) -> &str {
        "TensorRT <= 10 implicit INT8: int8 symmetric per-tensor activations on every quantized tensor, per-channel weights; writes calibration.cache"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut q = TensorRtQuantizer::default();
        q.observer = o.observer.unwrap_or(q.observer);
        Ok(Box::new(q))
    }
    fn exporters(&self) -> Vec<String> {
        ["qdq", "quant-json", "float-onnx", "trt-calib-cache"].map(String::from).to_vec()
    }
}

/// TensorRT's Q/DQ placement: inputs of weighted operations and residual inputs of Add.
struct ExplicitQuantizer {
    name: &'static str,
    precision: TargetPrecision,
    activation_bits: u32,
    weight_bits: u32,
    activation_symmetric: bool,
    weight_per_channel: bool,
    observer: ObserverKind,
}

impl ExplicitQuantizer {
    fn int8(name: &'static str) -> Self {
        Self {
            name,
            precision: TargetPrecision::Int8,
            activation_bits: 8,
            weight_bits: 8,
            activation_symmetric: true,
            weight_per_channel: true,
            observer: ObserverKind::Minmax,
        }
    }

    fn activation(&self) -> mppq_quant::Result<TensorQuantConfig> {
        let mut c = TensorQuantConfig::linear(self.activation_bits, self.activation_symmetric, None)?;
        c.observer = self.observer;
        Ok(c)
    }
}

/// Whether `var` is computed by a weighted operation, which TensorRT fuses the Add into.
fn from_weighted_op(graph: &Graph, var: VarId) -> bool {
    graph
        .producer(var)
        .and_then(|p| graph.operation(p).ok())
        .is_some_and(|op| mppq_ir::op_roles(op).is(mppq_ir::OpClass::WeightedLinear))
}

/// The inputs of an Add that TensorRT wants quantized: when both operands are computed at run
/// time and one comes from a weighted operation, the other one (the skip connection; when both
/// do, the second, as `out + identity` is written). Otherwise none: a plain Add stays float.
fn residual_inputs(graph: &Graph, id: OpId) -> mppq_quant::Result<Vec<bool>> {
    let op = graph.operation(id)?;
    let runtime = |slot: usize| -> mppq_quant::Result<Option<VarId>> {
        Ok(match op.inputs().get(slot) {
            Some(Some(v)) if input_kind(graph, id, slot)? == SlotKind::Activation => {
                graph.variable(*v)?.value.is_none().then_some(*v)
            }
            _ => None,
        })
    };
    let mut quantize = vec![false; op.inputs().len()];
    if let (2, Some(a), Some(b)) = (op.inputs().len(), runtime(0)?, runtime(1)?) {
        match (from_weighted_op(graph, a), from_weighted_op(graph, b)) {
            (true, false) => quantize[1] = true,
            (false, true) => quantize[0] = true,
            (true, true) => quantize[1] = true,
            (false, false) => {}
        }
    }
    Ok(quantize)
}

impl Quantizer for ExplicitQuantizer {
    fn name(&self) -> &str {
        self.name
    }

    fn target_precision(&self) -> TargetPrecision {
        self.precision
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        mppq_quant::quantizer::op_types::TENSORRT_EXPLICIT.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        let op = graph.operation(id)?;
        let residual = if op.op_type == "Add" { Some(residual_inputs(graph, id)?) } else { None };
        let mut input_configs = Vec::with_capacity(op.inputs().len());
        for slot in 0..op.inputs().len() {
            input_configs.push(match (&residual, input_kind(graph, id, slot)?) {
                (Some(chosen), _) => match chosen.get(slot) {
                    Some(true) => Some(self.activation()?),
                    _ => None,
                },
                (None, SlotKind::Activation) => Some(self.activation()?),
                (None, SlotKind::Weight { axis }) => {
                    let axis = axis.filter(|_| self.weight_per_channel);
                    Some(TensorQuantConfig::linear(self.weight_bits, true, axis)?)
                }
                (None, SlotKind::Bias | SlotKind::Skip) => None,
            });
        }
        let output_configs = vec![None; op.outputs().len()];
        Ok(OperationQuantConfig { input_configs, output_configs })
    }
}
