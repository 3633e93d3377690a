//! The quantization pipeline of mppq: one pass per module, each asking a small
//! [`PassContext`] (the graph, the operator registry, the device, the calibration batches, a
//! progress sink) instead of the executor's internals, and returning a [`PassReport`].
//!
//! Built-in passes, in pipeline order ([`Pipeline::from_setting`]):
//! [`fold_batchnorm`], [`quant_fusion`], [`redundant_quant_simplify`], [`parameter_quantize`],
//! [`runtime_calibration`], [`quant_alignment`], [`passive_parameter_quantize`],
//! [`parameter_baking`]. Their knobs live in one serde struct, [`PipelineSetting`].
//!
//! Configs that share parameters are linked with `dominated_by` (see
//! `mppq_ir::quant::sync_dominated`): an `Overlapped` config is not applied (another config
//! quantizes the tensor); an active dominated config is applied with a copy of its
//! dominator's scale/offset.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mppq_passes::{NoProgress, PassContext, Pipeline, PipelineSetting, run_pipeline};
//! # let (mut graph, batches) = (mppq_ir::Graph::new("g"), Vec::new());
//! let setting = PipelineSetting::default();
//! let (registry, device) = (mppq_exec::OpRegistry::builtin(), mppq_exec::Device::cpu());
//! let mut progress = NoProgress;
//! let mut ctx = PassContext {
//!     graph: &mut graph, registry: &registry, device: &device, opsets: &|_| 17,
//!     batches: &batches, progress: &mut progress,
//! };
//! run_pipeline(&mut ctx, &mut Pipeline::before_dispatch(&setting)?)?;
//! // ... dispatch, then `mppq_quant::quantizer::init_quantization` ...
//! for report in run_pipeline(&mut ctx, &mut Pipeline::from_setting(&setting)?)? {
//!     println!("{report}");
//! }
//! # Ok(()) }
//! ```
//!
//! A new pass is one module: a struct implementing [`Pass`], a numeric test on a tiny graph,
//! and one line in [`Pipeline::from_setting`] (plus its knobs in [`PipelineSetting`]).

pub mod error;
pub mod fold_batchnorm;
pub mod parameter_baking;
pub mod parameter_quantize;
pub mod pass;
pub mod passive_parameter_quantize;
pub mod pipeline;
pub mod progress;
pub mod quant_alignment;
pub mod quant_fusion;
pub mod redundant_quant_simplify;
pub mod runtime_calibration;
pub mod setting;
mod slots;
#[cfg(test)]
mod test_graphs;

pub use error::{PassError, Result};
pub use pass::{Pass, PassContext, PassReport};
pub use pipeline::{Pipeline, run_pipeline};
pub use progress::{NoProgress, ProgressSink, RecordingProgress, TerminalProgress};
pub use quant_alignment::ConcatMode;
pub use setting::{AlignmentSetting, CalibrationKnobs, FusionSetting, PipelineSetting};
