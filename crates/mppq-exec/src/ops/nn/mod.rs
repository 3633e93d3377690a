//! Neural-network layers: convolutions, pooling, normalisations, matrix products, softmax, resizing.

use crate::registry::OpRegistry;

mod avg_pool;
mod conv;
mod conv_transpose;
mod gemm;
mod matmul;
mod max_pool;
mod util;

pub fn register(r: &mut OpRegistry) {
    avg_pool::register(r);
    conv::register(r);
    conv_transpose::register(r);
    gemm::register(r);
    matmul::register(r);
    max_pool::register(r);
}
