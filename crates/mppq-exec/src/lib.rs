//! The executor of mppq: runs an IR graph on Burn, in float and with quantization simulation.
//!
//! One operator code path serves every backend: values are rank-erased Burn tensors
//! ([`Tensor`], [`Value`]) on a run-time [`Device`] (CPU `flex` by default, GPU `wgpu` behind
//! the `wgpu` feature, Burn's older CPU backend `ndarray` behind the `ndarray` feature). What the
//! crate owns, and where:
//!
//! - [`kernel`]: the kernel contract every operator implements ([`Kernel`], built by a
//!   [`KernelBuilder`] from an [`OpNode`], run with a [`KernelContext`]).
//! - [`registry`]: the operator table ([`OpRegistry`]): which builder serves which (domain, op
//!   type, opset); platforms start from the built-in one and override or add operators.
//! - [`ops`]: the built-in operators, one file per operator (attribute parsing, checks, Burn
//!   implementation, registration), in folders named after ONNX's operator families
//!   (controlflow, generator, logical, math, nn, object_detection, optional, quantization,
//!   reduction, rnn, sequence, signal, tensor).
//! - [`allocator`]: keeping freed tensor memory for the next pass (a process setting the CLI
//!   turns on; page faults were a third of a quantize's time).
//! - [`budget`]: the largest tensor an operator may allocate from computed sizes (checked before
//!   allocating, so an absurd size is an error naming the node, not an abort).
//! - [`cancel`]: stopping every run from outside, between graph runs (Ctrl-C in the Python
//!   binding).
//! - [`cpu`]: the hand-written CPU kernels (convolution on a packed matrix product, max pooling)
//!   and zero-copy access to the CPU backend's float32 buffers.
//! - [`simulation`]: quantization simulation: the [`QuantSimulation`] hook, the fake-quantization
//!   kernels ([`simulation::fake_quant`]) and integer-exact quantized convolutions
//!   ([`simulation::integer`]).
//! - [`engine`]: the [`Executor`] (topological plan, partial runs, early freeing of values),
//!   calling the [`hooks`] ([`ExecHook`]) around every operation.
//! - [`tensor`], [`value`], [`device`], [`error`]: values, devices and errors.

pub mod allocator;
pub mod budget;
pub mod cancel;
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
pub use simulation::{FakeQuantizer, IdentityFakeQuant, QuantSimulation, SimulationMemo};
pub use tensor::Tensor;
pub use value::Value;
