//! Element-wise arithmetic, math functions, activations, comparisons and logic.

use crate::registry::OpRegistry;

mod elementwise;

pub fn register(r: &mut OpRegistry) {
    elementwise::register(r);
}
