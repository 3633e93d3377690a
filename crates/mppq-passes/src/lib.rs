//! The quantization pipeline of mppq and the runtime its passes run on.
//!
//! A pass is one module: a struct implementing [`Pass`] that asks a small [`PassContext`]
//! instead of the executor's internals. The context offers the graph, the operator registry and
//! device, the calibration data as a stream ([`mppq_quant::CalibrationData`]), statistics the pass
//! declares ([`statistics`](runtime::statistics): collected in one run over the data, on the float or the simulated
//! graph), a block runner that runs the operations between two cuts from cached inputs
//! ([`block`](runtime::block)), weights and biases by role as `f32` views with write-back ([`params`](runtime::params)) and
//! progress ([`progress`](runtime::progress)). The pipeline ([`Pipeline::full`]) is the one list of steps, dispatch
//! and quantizer initialisation included:
//!
//! [`fold_constants`](structural::fold_constants) → [`fold_batchnorm`](structural::fold_batchnorm) → [`dispatch`](configuration::dispatch) → [`init_quantization`](configuration::init_quantization) → [`edge_layers`](configuration::edge_layers) (when
//! set) → [`quant_fusion`](structural::quant_fusion) →
//! [`redundant_quant_simplify`](structural::redundant_quant_simplify) → optimisation transforms by level ([`isotone_calibration`](optimisation::isotone_calibration),
//! [`equalization`](optimisation::equalization), [`ssd_equalization`](optimisation::ssd_equalization), [`channel_split`](optimisation::channel_split), [`smooth_quant`](optimisation::smooth_quant), [`range_search`](optimisation::range_search)) →
//! [`parameter_quantize`](calibration::parameter_quantize) → [`runtime_calibration`](calibration::runtime_calibration) → [`quant_alignment`](calibration::quant_alignment) →
//! [`passive_parameter_quantize`](calibration::passive_parameter_quantize) → training passes ([`adaround`](training::adaround), [`round_tuning`](training::round_tuning),
//! [`block_reconstruction`](training::block_reconstruction), [`lsq`](training::lsq), on [`reconstruction`](training::reconstruction)) → [`bias_correction`](optimisation::bias_correction) → [`parameter_baking`](calibration::parameter_baking).
//!
//! Optimisation passes are guarded ([`guard`](runtime::guard)): the pipeline measures the graph outputs' SNR
//! against the float model ([`compare`](runtime::compare)) and undoes a pass that does not raise it.
//!
//! Their knobs live in one serde struct, [`PipelineSetting`]. Configs that share parameters are
//! linked with `dominated_by` (see `mppq_ir::quant::sync_dominated`): an `Overlapped` config is
//! not applied (another config quantizes the tensor); an active dominated config is applied with
//! a copy of its dominator's scale/offset.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mppq_passes::{Dispatch, NoProgress, PassContext, Pipeline, PipelineSetting, run_pipeline};
//! use mppq_quant::quantizer::{Quantizer, quantizer_by_name};
//! # let (mut graph, batches) = (mppq_ir::Graph::new("g"), Vec::<mppq_quant::Feeds>::new());
//! let quantizer: std::sync::Arc<dyn Quantizer> = quantizer_by_name("default")?.into();
//! let context = mppq_dispatch::DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
//! let dispatch = Dispatch { dispatcher: "conservative".into(), context };
//! let (registry, device) = (mppq_exec::OpRegistry::builtin(), mppq_exec::Device::cpu());
//! let mut progress = NoProgress;
//! let mut ctx = PassContext::new(&mut graph, &registry, &device, &|_| 17, &batches, &mut progress);
//! for report in run_pipeline(&mut ctx, &mut Pipeline::full(&PipelineSetting::default(), dispatch, quantizer, Default::default())?)? {
//!     println!("{report}");
//! }
//! # Ok(()) }
//! ```
//!
//! Rooms: [`runtime`] (what passes run on), [`structural`], [`configuration`], [`calibration`],
//! [`optimisation`], [`training`]. Adding a pass is one module in its room, one line in `Pipeline::build` and its knobs in
//! [`PipelineSetting`]: `docs/adding-a-pass.md` walks through one.

pub mod calibration;
pub mod configuration;
pub mod error;
pub mod optimisation;
pub mod runtime;
pub mod setting;
pub mod structural;
#[cfg(test)]
mod test_graphs;
pub mod training;
pub mod weight_only;

pub use calibration::quant_alignment::ConcatMode;
pub use configuration::dispatch::Dispatch;
pub use error::{PassError, Result};
pub use runtime::block::BlockRunner;
pub use runtime::compare::{CompareTarget, ErrorStats, NamedOutputs, compare_to_reference, float_outputs};
pub use runtime::guard::{Guard, GuardOptions, GuardOutcome};
pub use runtime::params::{OpParams, ParamView, op_params, write_param};
pub use runtime::pass::{Pass, PassContext, PassReport};
pub use runtime::pipeline::{Pipeline, StagePasses, run_pipeline};
pub use runtime::progress::{NoProgress, ProgressSink, RecordingProgress};
pub use runtime::statistics::{GraphMode, StatRequest, StatValue, Statistic, Statistics, collect_statistics};
pub use setting::{
    AlignmentSetting, CalibrationKnobs, FusionSetting, GuardSetting, MAX_OPTIMIZE, PASS_LEVELS, PipelineSetting,
};
