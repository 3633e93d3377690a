//! The pass runtime: what every pass runs on and nothing a pass decides. The [`pass::Pass`]
//! interface and its [`pass::PassContext`], the [`pipeline`] that orders the passes and runs
//! them, the [`guard`] that undoes what does not help (measured with [`compare`]), declared
//! [`statistics`] collected in one run over the data, the [`block`] runner, weights and biases
//! by role ([`params`]), config-slot walks (`slots`) and [`progress`] reporting.

pub mod block;
pub mod compare;
pub mod guard;
pub mod params;
pub mod pass;
pub mod pipeline;
pub mod progress;
pub(crate) mod slots;
pub mod statistics;
#[cfg(test)]
mod tests;
