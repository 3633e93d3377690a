//! The quantization pipeline of mppq and the runtime its passes run on.
//!
//! A pass is one module: a struct implementing [`Pass`] that asks a small [`PassContext`]
//! instead of the executor's internals. The context offers the graph, the operator registry and
//! device, the calibration data as a stream ([`mppq_quant::CalibrationData`]), statistics the pass
//! declares ([`statistics`]: collected in one run over the data, on the float or the simulated
//! graph), a block runner that runs the operations between two cuts from cached inputs
//! ([`block`]), weights and biases by role as `f32` views with write-back ([`params`]) and
//! progress ([`progress`]). The pipeline ([`Pipeline::full`]) is the one list of steps, dispatch
//! and quantizer initialisation included:
//!
//! [`fold_constants`] → [`fold_batchnorm`] → [`dispatch`] → [`init_quantization`] → [`edge_layers`] (when
//! set) → [`quant_fusion`] →
//! [`redundant_quant_simplify`] → optimisation transforms by level ([`isotone_calibration`],
//! [`equalization`], [`ssd_equalization`], [`channel_split`], [`smooth_quant`], [`range_search`]) →
//! [`parameter_quantize`] → [`runtime_calibration`] → [`quant_alignment`] →
//! [`passive_parameter_quantize`] → training passes ([`adaround`], [`round_tuning`],
//! [`block_reconstruction`], [`lsq`], on [`reconstruction`]) → [`bias_correction`] → [`parameter_baking`].
//!
//! Optimisation passes are guarded ([`guard`]): the pipeline measures the graph outputs' SNR
//! against the float model ([`compare`]) and undoes a pass that does not raise it.
//!
//! Their knobs live in one serde struct, [`PipelineSetting`]. Configs that share parameters are
//! linked with `dominated_by` (see `mppq_ir::quant::sync_dominated`): an `Overlapped` config is
//! not applied (another config quantizes the tensor); an active dominated config is applied with
//! a copy of its dominator's scale/offset.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mppq_passes::{NoProgress, PassContext, Pipeline, PipelineSetting, dispatch::Dispatch, run_pipeline};
//! use mppq_quant::quantizer::{Quantizer, quantizer_by_name};
//! # let (mut graph, batches) = (mppq_ir::Graph::new("g"), Vec::<mppq_quant::Feeds>::new());
//! let quantizer: std::sync::Arc<dyn Quantizer> = quantizer_by_name("default")?.into();
//! let context = mppq_dispatch::DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
//! let dispatch = Dispatch { dispatcher: "conservative".into(), context };
//! let (registry, device) = (mppq_exec::OpRegistry::builtin(), mppq_exec::Device::cpu());
//! let mut progress = NoProgress;
//! let mut ctx = PassContext::new(&mut graph, &registry, &device, &|_| 17, &batches, &mut progress);
//! for report in run_pipeline(&mut ctx, &mut Pipeline::full(&PipelineSetting::default(), dispatch, quantizer)?)? {
//!     println!("{report}");
//! }
//! # Ok(()) }
//! ```
//!
//! Adding a pass is one module, one line in `Pipeline::build` and its knobs in
//! [`PipelineSetting`]: `docs/adding-a-pass.md` walks through one.

pub mod adaround;
pub mod bias_correction;
pub mod block;
pub mod block_reconstruction;
pub mod channel_split;
pub mod compare;
pub mod dispatch;
pub mod edge_layers;
pub mod equalization;
pub mod error;
pub mod fold_batchnorm;
pub mod fold_constants;
pub mod guard;
pub mod init_quantization;
pub mod isotone_calibration;
pub mod lsq;
pub mod mixed_range_concat;
#[cfg(test)]
mod optimisation_tests;
pub mod parameter_baking;
pub mod parameter_quantize;
pub mod params;
pub mod pass;
pub mod passive_parameter_quantize;
pub mod pipeline;
pub mod progress;
pub mod quant_alignment;
pub mod quant_fusion;
pub mod range_search;
pub mod reconstruction;
pub mod redundant_quant_simplify;
pub mod round_tuning;
pub mod runtime_calibration;
#[cfg(test)]
mod runtime_tests;
pub mod setting;
mod slots;
pub mod smooth_quant;
pub mod ssd_equalization;
pub mod statistics;
#[cfg(test)]
mod test_graphs;
#[cfg(test)]
mod training_tests;

pub use block::BlockRunner;
pub use compare::{CompareTarget, ErrorStats, NamedOutputs, compare_to_reference, float_outputs, mean_snr_db, snr_db};
pub use error::{PassError, Result};
pub use guard::{Guard, GuardOptions, GuardOutcome};
pub use params::{OpParams, ParamView, op_params, write_param};
pub use pass::{Pass, PassContext, PassReport};
pub use pipeline::{Pipeline, run_pipeline};
pub use progress::{NoProgress, ProgressSink, RecordingProgress, TerminalProgress};
pub use quant_alignment::ConcatMode;
pub use setting::{
    AlignmentSetting, CalibrationKnobs, FusionSetting, GuardSetting, MAX_OPTIMIZE, PASS_LEVELS, PipelineSetting,
};
pub use statistics::{GraphMode, StatRequest, StatValue, Statistic, Statistics, collect_statistics};
