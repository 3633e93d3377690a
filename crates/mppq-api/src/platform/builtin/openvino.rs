//! `openvino-int8`: QDQ as NNCF writes it for OpenVINO — weights int8 symmetric per output channel
//! on the narrow range [−127, 127] (OpenVINO's int8 weights never use −128), activations uint8
//! asymmetric per tensor, biases int32 from `s_in · s_w`; what NNCF leaves float (constants of
//! element-wise operations, Softmax outputs) stays float. OpenVINO reads the Q/DQ pairs as
//! FakeQuantize and runs the quantized operations in int8; `cargo xtask qdq-check --platform
//! openvino-int8 --runtime openvino` compares that with our simulation. Written as a user's crate
//! would write a platform: its own [`Quantizer`] over the role-table slot kinds, and a
//! [`Platform`].

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{OperationQuantConfig, TargetPrecision};
use mppq_ir::{Graph, OpId};
use mppq_quant::quantizer::layout::adjust_weights;
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer};

pub(crate) struct OpenVino;

impl Platform for OpenVino {
    fn name(&self) -> &str {
        "openvino-int8"
    }
    fn description(&self) -> &str {
        "OpenVINO (NNCF's QDQ): uint8 asymmetric activations, int8 narrow-range [-127, 127] symmetric per-channel weights, int32 biases"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut inner = OnnxRuntimeQuantizer::default();
        if let Some(observer) = o.observer {
            inner.observer = observer;
        }
        Ok(Box::new(OpenVinoQuantizer { inner }))
    }
}

/// ONNX Runtime's scheme (uint8 activations; elementwise constants and Softmax outputs kept
/// float, as NNCF leaves them) with OpenVINO's narrow-range weights: a user's quantizer can wrap
/// a built-in one and adjust its configs.
struct OpenVinoQuantizer {
    inner: OnnxRuntimeQuantizer,
}

impl Quantizer for OpenVinoQuantizer {
    fn name(&self) -> &str {
        "openvino-int8"
    }

    fn target_precision(&self) -> TargetPrecision {
        self.inner.target_precision()
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        self.inner.quant_operation_types()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        let mut config = self.inner.init_quantize_config(graph, id)?;
        adjust_weights(graph, id, &mut config, |c| c.quant_min = -127)?;
        Ok(config)
    }
}
