//! Generators (ONNX's `generator` operators): Constant, ConstantOfShape, EyeLike and Range.

use crate::registry::OpRegistry;

mod constant;
mod constant_of_shape;
mod eye_like;
mod range;

pub fn register(r: &mut OpRegistry) {
    constant::register(r);
    constant_of_shape::register(r);
    eye_like::register(r);
    range::register(r);
}
