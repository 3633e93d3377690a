//! Element-wise arithmetic, math functions, activations, comparisons, logic, bitwise operators,
//! casts and pass-through operators.

use crate::registry::OpRegistry;

mod activation;
mod arith;
mod bitwise;
mod cast;
mod clip;
mod compare;
mod identity;
mod isnan;
mod logic;
mod pow;
mod prelu;
mod unary;
mod util;
mod variadic;
mod where_op;

pub fn register(r: &mut OpRegistry) {
    activation::register(r);
    arith::register(r);
    bitwise::register(r);
    cast::register(r);
    clip::register(r);
    compare::register(r);
    identity::register(r);
    isnan::register(r);
    logic::register(r);
    pow::register(r);
    prelu::register(r);
    unary::register(r);
    variadic::register(r);
    where_op::register(r);
}

#[cfg(test)]
mod tests;
