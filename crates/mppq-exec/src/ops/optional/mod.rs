//! Optionals (ONNX's `optional` operators): Optional, OptionalHasElement, OptionalGetElement.

use crate::registry::OpRegistry;

mod optional_op;

pub fn register(r: &mut OpRegistry) {
    optional_op::register(r);
}
