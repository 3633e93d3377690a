//! The operation types each family of targets quantizes, in one table: a quantizer declares one
//! of these (`Quantizer::quant_operation_types`) and the dispatchers never hand it anything else.
//! The lists differ because the runtimes differ; each constant says how and why. Order matters
//! for nothing but listings, and is kept as it was.

/// The `default` (`ort-int8`) platform, for ONNX Runtime: the common set below without Softmax
/// (ORT fuses `DQ → Softmax → Q` into QLinearSoftmax, whose lookup-table exponential differs
/// from the simulation by a step on ~5 % of the probabilities, so probabilities stay float), plus
/// the recurrent cells, whose weights W and R alone are quantized (ORT runs the float cell on
/// the dequantized weights; `quantizer/onnxruntime.rs` says why).
pub const ONNX_RUNTIME: [&str; 19] = [
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "LSTM",
    "GRU",
    "RNN",
    "Add",
    "Sub",
    "Mul",
    "Relu",
    "Clip",
    "LeakyRelu",
    "Sigmoid",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Concat",
    "Resize",
];

/// What the built-in integer and FP8 quantizers configure for the other Q/DQ runtimes
/// (TensorRT's implicit mode, OpenVINO, QNN/SNPE, OpenPPL, `lowbit`, FP8, `pow2-int8`): the
/// weighted operations, element-wise arithmetic, the fusable activations, pooling, Concat,
/// Resize and Softmax; no recurrent cells (only the ONNX Runtime platform has a measured
/// recipe for them).
pub const COMMON: [&str; 17] = [
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Relu",
    "Clip",
    "LeakyRelu",
    "Sigmoid",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Concat",
    "Resize",
    "Softmax",
];

/// TensorRT's explicit quantization (`trt-int8`, `trt-lowbit`): Q/DQ only on the inputs of the
/// weighted operations and on the residual input of an Add, as NVIDIA's placement guidance
/// says; every other operation runs in the precision TensorRT's fusions pick.
pub const TENSORRT_EXPLICIT: [&str; 5] = ["Conv", "ConvTranspose", "Gemm", "MatMul", "Add"];

/// The academic setting (`academic-int8`, as PPQ's `ACADEMIC_INT8`): only the weighted
/// operations with a bias slot, the ones papers quantize.
pub const ACADEMIC: [&str; 3] = ["Conv", "Gemm", "ConvTranspose"];

/// ncnn's int8 inference (`ncnn-int8`): only the layers `ncnn2int8` converts, Convolution (and
/// its depthwise form) and InnerProduct, which ONNX writes as Conv and Gemm.
pub const NCNN: [&str; 2] = ["Conv", "Gemm"];

/// Weight-only quantization (`weight-only`): the products with a 2-D weight, whose weight is
/// block-quantized and run by ONNX Runtime's `MatMulNBits` (or a blocked `DequantizeLinear`).
pub const WEIGHT_ONLY: [&str; 2] = ["MatMul", "Gemm"];
