//! Reductions (ONNX's `reduction` operators): ReduceSum, ReduceMean, ... and ArgMax/ArgMin.

use crate::registry::OpRegistry;

mod argmax;
mod reduce;

pub fn register(r: &mut OpRegistry) {
    argmax::register(r);
    reduce::register(r);
}
