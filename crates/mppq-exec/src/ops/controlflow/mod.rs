//! Control flow (ONNX's `controlflow` operators): If, Loop and Scan, which run their sub-graphs
//! with executors of their own.

use crate::registry::OpRegistry;

mod if_op;
mod loop_op;
mod scan;

pub fn register(r: &mut OpRegistry) {
    if_op::register(r);
    loop_op::register(r);
    scan::register(r);
}
