//! Neural-network layers: convolutions (float, integer, quantized, deformable, causal),
//! pooling, normalisations, matrix products, softmax, attention, recurrent cells, losses,
//! resizing and sampling grids. One file per operator or per family sharing one implementation.

use crate::registry::OpRegistry;

mod affine_grid;
mod attention;
mod avg_pool;
mod batch_norm;
mod causal_conv;
mod col2im;
mod conv;
mod conv_transpose;
mod deform_conv;
mod einsum;
mod gemm;
mod global_pool;
mod grid_sample;
mod group_norm;
mod instance_norm;
mod layer_norm;
mod loss;
mod lp_norm;
mod lrn;
mod matmul;
mod max_pool;
mod max_unpool;
mod mvn;
mod quantized;
mod resize;
mod rms_norm;
mod rotary_embedding;
mod softmax;
mod util;

#[cfg(test)]
mod tests;

pub fn register(r: &mut OpRegistry) {
    affine_grid::register(r);
    attention::register(r);
    avg_pool::register(r);
    batch_norm::register(r);
    causal_conv::register(r);
    col2im::register(r);
    conv::register(r);
    conv_transpose::register(r);
    deform_conv::register(r);
    einsum::register(r);
    gemm::register(r);
    global_pool::register(r);
    grid_sample::register(r);
    group_norm::register(r);
    instance_norm::register(r);
    layer_norm::register(r);
    loss::register(r);
    lp_norm::register(r);
    lrn::register(r);
    matmul::register(r);
    max_pool::register(r);
    max_unpool::register(r);
    mvn::register(r);
    quantized::register(r);
    resize::register(r);
    rms_norm::register(r);
    rotary_embedding::register(r);
    softmax::register(r);
}
