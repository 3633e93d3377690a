//! Qualcomm's runtimes, which read ranges as AIMET/QNN encodings (`model.encodings`, passed to
//! the converter with `--quantization_overrides`):
//!
//! - `qnn-int8`: QNN HTP's usual int8 scheme (AIMET's HTP config): uint8 asymmetric activations,
//!   int8 symmetric per-channel weights, int32 biases; `weight_bits = 4` for HTP's W4A8.
//! - `snpe-int8`: `snpe-dlc-quantize`'s defaults: uint8 asymmetric activations *and* weights, one
//!   range per weight tensor, int32 biases (`--bias_bitwidth 32`).
//!
//! Both wrap the `default` quantizer (what it keeps float, Softmax outputs and the constants of
//! element-wise operations, QNN runs in float as well) and change its weight configs, as a user's
//! quantizer can build on a built-in one.

use crate::error::{ApiError, Result};
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_ir::quant::{OperationQuantConfig, TargetPrecision, TensorQuantConfig};
use mppq_ir::{Graph, OpId};
use mppq_quant::quantizer::layout::adjust_weights;
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer};

/// The files both write: the QDQ model and the encodings the converter reads.
fn exporters() -> Vec<String> {
    ["qdq", "quant-json", "float-onnx", "qnn-encodings"].map(String::from).to_vec()
}

pub(crate) struct Qnn;

impl Platform for Qnn {
    fn name(&self) -> &str {
        "qnn-int8"
    }
    fn description(&self) -> &str {
        "Qualcomm QNN (HTP): uint8 asymmetric activations, int8 symmetric per-channel weights (weight_bits 4 for W4A8), int32 biases; writes AIMET/QNN encodings"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer, O::WeightBits])?;
        let mut inner = OnnxRuntimeQuantizer::default();
        inner.observer = o.observer.unwrap_or(inner.observer);
        match o.weight_bits {
            None | Some(8) => {}
            Some(4) => inner.weight_bits = 4,
            Some(bits) => {
                return Err(ApiError::Setting(format!(
                    "platform `qnn-int8`: weight_bits {bits}: QNN HTP takes 8 or 4"
                )));
            }
        }
        Ok(Box::new(WeightsAs { name: "qnn-int8", inner, weight: None }))
    }
    fn exporters(&self) -> Vec<String> {
        exporters()
    }
}

pub(crate) struct Snpe;

impl Platform for Snpe {
    fn name(&self) -> &str {
        "snpe-int8"
    }
    fn description(&self) -> &str {
        "Qualcomm SNPE (snpe-dlc-quantize defaults): uint8 asymmetric activations and per-tensor weights, int32 biases; writes AIMET/QNN encodings"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut inner = OnnxRuntimeQuantizer::default();
        inner.observer = o.observer.unwrap_or(inner.observer);
        Ok(Box::new(WeightsAs { name: "snpe-int8", inner, weight: Some(TensorQuantConfig::linear(8, false, None)?) }))
    }
    fn exporters(&self) -> Vec<String> {
        exporters()
    }
}

/// The `default` quantizer with every weight config replaced by `weight` (when given).
struct WeightsAs {
    name: &'static str,
    inner: OnnxRuntimeQuantizer,
    weight: Option<TensorQuantConfig>,
}

impl Quantizer for WeightsAs {
    fn name(&self) -> &str {
        self.name
    }

    fn target_precision(&self) -> TargetPrecision {
        self.inner.target_precision()
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        self.inner.quant_operation_types()
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_quant::Result<OperationQuantConfig> {
        let mut config = self.inner.init_quantize_config(graph, id)?;
        if let Some(weight) = &self.weight {
            adjust_weights(graph, id, &mut config, |c| *c = weight.clone())?;
        }
        Ok(config)
    }
}
