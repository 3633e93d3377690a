//! Neural-network layers (ONNX's `nn` operators): convolutions (float, deformable, causal),
//! pooling, normalisations, LRN, Dropout, attention, rotary embedding and Col2Im. Flatten
//! (ONNX `nn`) shares Reshape's kernel and lives in [`super::tensor`]; the hand-written CPU
//! kernels are in [`crate::cpu`].

use crate::registry::OpRegistry;

mod attention;
mod avg_pool;
mod batch_norm;
mod causal_conv;
mod col2im;
pub(super) mod conv;
mod conv_transpose;
mod deform_conv;
mod dropout;
mod global_pool;
mod group_norm;
mod instance_norm;
mod layer_norm;
mod lp_norm;
mod lrn;
mod max_pool;
mod max_unpool;
mod mvn;
mod rms_norm;
mod rotary_embedding;
#[cfg(test)]
mod tests;

pub fn register(r: &mut OpRegistry) {
    attention::register(r);
    avg_pool::register(r);
    batch_norm::register(r);
    causal_conv::register(r);
    col2im::register(r);
    conv::register(r);
    conv_transpose::register(r);
    deform_conv::register(r);
    dropout::register(r);
    global_pool::register(r);
    group_norm::register(r);
    instance_norm::register(r);
    layer_norm::register(r);
    lp_norm::register(r);
    lrn::register(r);
    max_pool::register(r);
    max_unpool::register(r);
    mvn::register(r);
    rms_norm::register(r);
    rotary_embedding::register(r);
}
