//! Reductions, sorting, cumulative ops, quantize/dequantize, recurrent layers, control flow and detection ops.

use crate::registry::OpRegistry;

mod argmax;
mod cumulative;
mod dynamic_quantize;
mod if_op;
mod loop_op;
mod nms;
mod quantize;
mod recurrent;
mod reduce;
mod roi_align;
mod topk;
mod util;

pub fn register(r: &mut OpRegistry) {
    reduce::register(r);
    argmax::register(r);
    topk::register(r);
    cumulative::register(r);
    quantize::register(r);
    dynamic_quantize::register(r);
    if_op::register(r);
    loop_op::register(r);
    nms::register(r);
    roi_align::register(r);
    recurrent::register(r);
}
