//! `ppl-cuda-int8`: OpenPPL's CUDA engine as PPQ's `PPL_CUDA_INT8` targets it (the seeds' usage
//! tutorial): int8 symmetric per-tensor activations, int8 symmetric per-channel weights, int32
//! biases from `s_in · s_w`, on the common quantizable operations. PPL reads the float ONNX model
//! plus a JSON of quantization parameters, so that is what it exports (with the QDQ model for
//! checking in ONNX Runtime).

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::Quantizer;

pub(crate) struct PplCuda;

impl Platform for PplCuda {
    fn name(&self) -> &str {
        "ppl-cuda-int8"
    }
    fn description(&self) -> &str {
        "OpenPPL CUDA: int8 symmetric per-tensor activations, per-channel weights, int32 biases; writes the float model and ppl_cuda.json"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        // The scheme is TensorRT's implicit INT8 one: symmetric everywhere, weights per channel.
        super::tensorrt::TensorRtImplicit.quantizer(o)
    }
    fn exporters(&self) -> Vec<String> {
        ["float-onnx", "ppl-cuda-json", "qdq", "quant-json"].map(String::from).to_vec()
    }
}
