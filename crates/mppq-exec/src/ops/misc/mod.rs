//! Reductions, sorting, cumulative ops, quantize/dequantize, recurrent layers, control flow and detection ops.

use crate::registry::OpRegistry;

mod reduce;
mod util;

pub fn register(r: &mut OpRegistry) {
    reduce::register(r);
}
