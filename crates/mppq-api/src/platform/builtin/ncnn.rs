//! `ncnn-int8`: what ncnn's int8 inference computes (`ncnn2table` + `ncnn2int8`): only
//! Convolution, ConvolutionDepthWise and InnerProduct (ONNX Conv and Gemm) run in int8 — the input
//! blob symmetric int8 per tensor, the weight symmetric int8 per output channel, both on ncnn's
//! range [−127, 127] — the bias and the output stay float (ncnn dequantizes before the bias). A
//! grouped convolution with several outputs per group gets a per-tensor weight: ncnn keeps one
//! scale per group. Activations default to the KL observer, as `ncnn2table`'s `method=kl`.
//! Exports the ncnn table beside the usual files. Written as a user's crate would write a
//! platform: its own [`Quantizer`] over the role-table slot kinds, and a [`Platform`].

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{ObserverKind, OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};
use mppq_quant::quantizer::Quantizer;
use mppq_quant::quantizer::layout::{SlotKind, input_kind};

pub(crate) struct Ncnn;

impl Platform for Ncnn {
    fn name(&self) -> &str {
        "ncnn-int8"
    }
    fn description(&self) -> &str {
        "ncnn int8 (ncnn2table/ncnn2int8): Conv/Gemm inputs symmetric int8 [-127, 127] per tensor (KL), weights per channel, float bias and outputs; writes ncnn.table"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        Ok(Box::new(NcnnQuantizer { observer: o.observer.unwrap_or(ObserverKind::Kl) }))
    }
    fn exporters(&self) -> Vec<String> {
        ["qdq", "quant-json", "float-onnx", "ncnn-table"].map(String::from).to_vec()
    }
}

struct NcnnQuantizer {
    observer: ObserverKind,
}

/// Symmetric int8 on ncnn's range: `float2int8` clamps to [−127, 127].
fn ncnn_int8(channel_axis: Option<usize>) -> mppq_quant::Result<TensorQuantConfig> {
    let mut c = TensorQuantConfig::linear(8, true, channel_axis)?;
    c.quant_min = -127;
    Ok(c)
}

impl Quantizer for NcnnQuantizer {
    fn name(&self) -> &str {
        "ncnn-int8"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        mppq_quant::quantizer::op_types::NCNN.to_vec()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        let op = graph.operation(id)?;
        let grouped = op.op_type == "Conv" && op.attr_int("group", 1)? > 1 && !depthwise(graph, op);
        let mut input_configs = Vec::with_capacity(op.inputs().len());
        let output_configs = vec![None; op.outputs().len()];
        // ncnn runs a layer in int8 only with a constant weight (InnerProduct, not a MatMul of two
        // blobs): otherwise the operation stays float.
        if !matches!(input_kind(graph, id, 1)?, SlotKind::Weight { .. }) {
            input_configs.resize(op.inputs().len(), None);
            return Ok(OperationQuantConfig { input_configs, output_configs });
        }
        for slot in 0..op.inputs().len() {
            input_configs.push(match (slot, input_kind(graph, id, slot)?) {
                (0, SlotKind::Activation) => {
                    let mut c = ncnn_int8(None)?;
                    c.observer = self.observer;
                    Some(c)
                }
                (1, SlotKind::Weight { axis }) => Some(ncnn_int8(axis.filter(|_| !grouped))?),
                _ => None,
            });
        }
        Ok(OperationQuantConfig { input_configs, output_configs })
    }
}

/// A convolution with one output channel per group (ncnn's scale per group is one per channel).
fn depthwise(graph: &Graph, op: &mppq_ir::Operation) -> bool {
    let group = op.attr_int("group", 1).unwrap_or(1);
    let weight =
        op.inputs().get(1).copied().flatten().and_then(|v| graph.variable(v).ok()).and_then(|v| v.value.as_ref());
    weight.and_then(|t| t.shape().first().copied()).is_some_and(|out| out as i64 == group)
}
