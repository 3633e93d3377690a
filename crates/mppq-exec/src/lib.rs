//! The executor of mppq: runs an IR graph on Burn, in float and with quantization simulation.
//!
//! One operator code path serves every backend: values are rank-erased Burn tensors
//! ([`Tensor`], [`Value`]) on a run-time [`Device`] (CPU `flex` by default, GPU `wgpu` behind
//! the `wgpu` feature). It owns the operator registry ([`registry`]; one file per operator under
//! [`ops`], holding its attribute parsing, checks, Burn implementation and registration), the
//! engine ([`Executor`]: topological plan, partial runs, hooks, early freeing of values), and the
//! hook points for fake quantization ([`hooks`]).

pub mod cpu;
pub mod device;
pub mod engine;
pub mod error;
pub mod hooks;
pub mod kernel;
pub mod ops;
pub mod registry;
pub mod simulation;
pub mod tensor;
pub mod value;

pub use device::Device;
pub use engine::Executor;
pub use error::{ExecError, Result};
pub use hooks::ExecHook;
pub use kernel::{Kernel, KernelBuilder, KernelContext, OpNode};
pub use registry::OpRegistry;
pub use simulation::fake_quant::{
    BurnFakeQuant, FloatFormat, KernelPath, LinearFakeQuant, fake_quant_tensor, fake_quant_with,
};
pub use simulation::{FakeQuantizer, IdentityFakeQuant, QuantSimulation};
pub use tensor::Tensor;
pub use value::Value;

// Old module paths, kept so code written against them still compiles.
#[doc(hidden)]
pub use simulation::fake_quant;
#[doc(hidden)]
pub use simulation::integer as integer_sim;
