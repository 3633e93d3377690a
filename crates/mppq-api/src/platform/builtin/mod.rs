//! The built-in platforms, one file each, registered through the same [`Platform`] trait a
//! user's crate implements (each doubles as an example; `docs/platforms.md`). Each maps the
//! user's [`crate::QuantizerOptions`] onto its quantizer and refuses the options its target fixes
//! (an option is never silently ignored).

mod academic;
mod fp8;
mod lowbit;
mod ncnn;
mod onnxruntime;
mod openvino;
mod pow2;
mod ppl_cuda;
mod qualcomm;
mod tensorrt;
mod weight_only;

use crate::platform::Platform;
use mppq_quant::quantizer::Fp8Format;
use std::sync::Arc;

/// Every built-in platform.
pub(crate) fn builtin() -> Vec<Arc<dyn Platform>> {
    vec![
        Arc::new(onnxruntime::OnnxRuntime),
        Arc::new(onnxruntime::OrtInt8),
        Arc::new(tensorrt::TensorRt),
        Arc::new(tensorrt::TensorRtLowBit),
        Arc::new(tensorrt::TensorRtImplicit),
        Arc::new(lowbit::LowBit),
        Arc::new(fp8::Fp8 { name: "fp8-e4m3", format: Fp8Format::E4M3 }),
        Arc::new(fp8::Fp8 { name: "fp8-e5m2", format: Fp8Format::E5M2 }),
        Arc::new(openvino::OpenVino),
        Arc::new(academic::Academic),
        Arc::new(pow2::Pow2),
        Arc::new(ncnn::Ncnn),
        Arc::new(qualcomm::Qnn),
        Arc::new(qualcomm::Snpe),
        Arc::new(ppl_cuda::PplCuda),
        Arc::new(weight_only::WeightOnly),
    ]
}
