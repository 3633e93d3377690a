//! Logical operators (ONNX's `logical`): comparisons (Equal, Greater, Less, ...), boolean And,
//! Or, Xor, Not, and the bitwise operators (BitShift, BitwiseAnd, ...).

use crate::registry::OpRegistry;

mod bitwise;
mod compare;
mod logic;

pub fn register(r: &mut OpRegistry) {
    bitwise::register(r);
    compare::register(r);
    logic::register(r);
}
