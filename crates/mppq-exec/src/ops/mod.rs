//! Built-in operators, one file per operator (or per family of operators that share one
//! implementation, such as the element-wise binaries), in folders named after ONNX's operator
//! families (`onnx/defs/<family>`): controlflow, generator, logical, math, nn, object_detection,
//! optional, quantization, reduction, rnn, sequence, signal, tensor. Each file holds attribute
//! parsing (opset-aware), shape and type checks, the Burn implementation, and its `register`
//! function; each family's `register` lists its files, and [`register_all`] lists the families.
//! Helpers used across families are in `util`.

use crate::registry::OpRegistry;

mod controlflow;
mod generator;
mod logical;
mod math;
mod nn;
mod object_detection;
mod optional;
mod quantization;
mod reduction;
mod rnn;
mod sequence;
mod signal;
mod tensor;
#[cfg(test)]
mod tests;
mod util;

impl OpRegistry {
    /// Every built-in operator. (Defined here, not in `registry.rs`, so that the registry does not
    /// depend on the operators that depend on it.)
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        register_all(&mut r);
        r
    }
}

/// Registers every built-in operator.
pub fn register_all(r: &mut OpRegistry) {
    controlflow::register(r);
    generator::register(r);
    logical::register(r);
    math::register(r);
    nn::register(r);
    object_detection::register(r);
    optional::register(r);
    quantization::register(r);
    reduction::register(r);
    rnn::register(r);
    sequence::register(r);
    signal::register(r);
    tensor::register(r);
}
