//! Math (ONNX's `math` operators): element-wise arithmetic and functions, activations, Clip,
//! Pow, PRelu, variadic Max/Min/Sum/Mean, Expand, matrix products (MatMul, Gemm, Einsum),
//! Softmax/LogSoftmax/Hardmax, TopK, CumSum/CumProd, Det and the losses. Shrink (ONNX `nn`)
//! shares the activations' kernel and lives with them. The signal operators that ONNX also
//! defines in `math` are in [`super::signal`].

use crate::registry::OpRegistry;

mod activation;
mod arith;
mod clip;
mod cumulative;
mod det;
mod einsum;
mod expand;
mod gemm;
mod loss;
pub(super) mod matmul;
mod pow;
mod prelu;
mod softmax;
#[cfg(test)]
mod tests;
mod topk;
mod unary;
mod variadic;

pub fn register(r: &mut OpRegistry) {
    activation::register(r);
    arith::register(r);
    clip::register(r);
    cumulative::register(r);
    det::register(r);
    einsum::register(r);
    expand::register(r);
    gemm::register(r);
    loss::register(r);
    matmul::register(r);
    pow::register(r);
    prelu::register(r);
    softmax::register(r);
    topk::register(r);
    unary::register(r);
    variadic::register(r);
}
