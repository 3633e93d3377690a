//! Quantization (ONNX's `quantization` operators): QuantizeLinear, DequantizeLinear and
//! DynamicQuantizeLinear, with the integer and quantized products that share their arithmetic
//! (ConvInteger, QLinearConv, MatMulInteger and QLinearMatMul, which ONNX defines in `nn` and
//! `math`), and ONNX Runtime's weight-only `com.microsoft::MatMulNBits`.

use crate::registry::OpRegistry;

mod dynamic_quantize;
mod matmul_nbits;
mod quantize;
mod quantized;

pub fn register(r: &mut OpRegistry) {
    dynamic_quantize::register(r);
    matmul_nbits::register(r);
    quantize::register(r);
    quantized::register(r);
}
