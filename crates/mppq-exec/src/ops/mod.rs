//! Built-in operators, one file per operator (or per family of operators that share one
//! implementation, such as the element-wise binaries), grouped in six families (math, shape, nn, misc, sequence, extra). Each file holds
//! attribute parsing (opset-aware), shape and type checks, the Burn implementation, and its
//! `register` function; [`register_all`] is the one list of families.

use crate::registry::OpRegistry;

mod extra;
mod math;
mod misc;
mod nn;
mod sequence;
mod shape;

/// Registers every built-in operator.
pub fn register_all(r: &mut OpRegistry) {
    math::register(r);
    shape::register(r);
    nn::register(r);
    misc::register(r);
    sequence::register(r);
    extra::register(r);
}
