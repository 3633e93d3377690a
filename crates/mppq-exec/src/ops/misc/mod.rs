//! Reductions, sorting, cumulative ops, quantize/dequantize, recurrent layers, control flow and detection ops.

use crate::registry::OpRegistry;

pub fn register(_r: &mut OpRegistry) {}
