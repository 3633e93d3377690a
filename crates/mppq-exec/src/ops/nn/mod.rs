//! Neural-network layers: convolutions, pooling, normalisations, matrix products, softmax, resizing.

use crate::registry::OpRegistry;

mod avg_pool;
mod conv;
mod conv_transpose;
mod gemm;
mod matmul;
mod max_pool;
mod batch_norm;
mod global_pool;
mod instance_norm;
mod layer_norm;
mod group_norm;
mod lp_norm;
mod mvn;
mod softmax;
mod resize;
mod grid_sample;
mod einsum;
mod util;

pub fn register(r: &mut OpRegistry) {
    avg_pool::register(r);
    conv::register(r);
    conv_transpose::register(r);
    gemm::register(r);
    matmul::register(r);
    max_pool::register(r);
    batch_norm::register(r);
    global_pool::register(r);
    instance_norm::register(r);
    layer_norm::register(r);
    group_norm::register(r);
    lp_norm::register(r);
    mvn::register(r);
    softmax::register(r);
    resize::register(r);
    grid_sample::register(r);
    einsum::register(r);
}
