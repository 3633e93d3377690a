//! `PipelineSetting`: every knob of the built-in passes, as one serde struct. Unknown keys are
//! errors that name the key and the valid ones; missing keys take their defaults.

use crate::calibration::mixed_range_concat::MixedRangeConcatSetting;
use crate::calibration::quant_alignment::{ConcatMode, QuantAlignment};
use crate::error::{PassError, Result};
use crate::optimisation::bias_correction::BiasCorrectionSetting;
use crate::optimisation::channel_split::ChannelSplitSetting;
use crate::optimisation::equalization::EqualizationSetting;
use crate::optimisation::isotone_calibration::IsotoneSetting;
use crate::optimisation::range_search::RangeSearchSetting;
use crate::optimisation::smooth_quant::SmoothQuantSetting;
use crate::optimisation::ssd_equalization::SsdEqualizationSetting;
use crate::runtime::guard::GuardOptions;
use crate::training::reconstruction::ReconstructionSetting;
use mppq_ir::quant::ObserverKind;
use mppq_quant::ObserverOptions;
use mppq_quant::calibrate::CalibrationSetting;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineSetting {
    pub fusion: FusionSetting,
    /// Quantize each tensor once (`redundant_quant_simplify`).
    pub redundant_simplify: bool,
    pub calibration: CalibrationKnobs,
    pub alignment: AlignmentSetting,
    /// Write quantized weights into the initializers (`parameter_baking`). Off by default:
    /// exporters then see the float weights and every config in its calibrated state.
    pub baking: bool,
    /// Optimisation level: 0 = calibration only; 1 = + the cheap passes (isotone Softmax
    /// calibration; the default); 2 = + equalization, SmoothQuant, range search, bias correction;
    /// 3 = + block reconstruction (training, minutes on a CPU). A pass's own `enabled`
    /// overrides its level.
    pub optimize: u8,
    /// Weight bits of the first and last weighted operations (`edge_layers`), when the
    /// platform gives the others fewer; absent: the platform's bits everywhere.
    pub edge_weight_bits: Option<u32>,
    /// The transformer placement (`transformer_blocks`): in graphs with attention, linear layers
    /// quantize their inputs only and the element-wise operations they feed stay float; with it,
    /// SmoothQuant joins at level 1 for those graphs.
    pub transformer_blocks: bool,
    pub guard: GuardSetting,
    pub isotone_calibration: IsotoneSetting,
    pub equalization: EqualizationSetting,
    pub ssd_equalization: SsdEqualizationSetting,
    pub channel_split: ChannelSplitSetting,
    pub smooth_quant: SmoothQuantSetting,
    pub range_search: RangeSearchSetting,
    pub bias_correction: BiasCorrectionSetting,
    pub mixed_range_concat: MixedRangeConcatSetting,
    pub adaround: ReconstructionSetting,
    pub round_tuning: ReconstructionSetting,
    pub block_reconstruction: ReconstructionSetting,
    pub lsq: ReconstructionSetting,
    pub gptq: crate::weight_only::gptq::GptqSetting,
    pub awq: crate::weight_only::awq::AwqSetting,
}

/// The guard of the optimisation passes (see `mppq_passes::runtime::guard`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardSetting {
    /// Measure each optimisation pass and undo it when the output SNR falls.
    pub enabled: bool,
    /// Calibration batches the measurement runs on (at most).
    pub batches: usize,
    /// The least output-SNR gain (dB, on the calibration batches) for which a change is kept.
    pub min_gain_db: f64,
}

impl Default for GuardSetting {
    fn default() -> Self {
        let g = GuardOptions::default();
        Self { enabled: g.enabled, batches: g.batches, min_gain_db: g.min_gain_db }
    }
}

/// A pass that runs only when its section says `enabled = true`.
pub const BY_NAME_ONLY: u8 = u8::MAX;

/// The optimisation level each pass joins at (`optimize`), for listings and docs.
pub const PASS_LEVELS: &[(&str, u8)] = &[
    ("isotone_calibration", 1),
    ("equalization", 2),
    ("ssd_equalization", BY_NAME_ONLY),
    ("channel_split", BY_NAME_ONLY),
    ("smooth_quant", 2),
    ("range_search", 1),
    ("bias_correction", 2),
    ("mixed_range_concat", 1),
    ("adaround", BY_NAME_ONLY),
    ("round_tuning", BY_NAME_ONLY),
    ("block_reconstruction", 3),
    ("lsq", BY_NAME_ONLY),
    ("gptq", 1),
    ("awq", BY_NAME_ONLY),
];

/// The highest `optimize` level.
pub const MAX_OPTIMIZE: u8 = 3;

impl Default for PipelineSetting {
    fn default() -> Self {
        Self {
            fusion: FusionSetting::default(),
            redundant_simplify: true,
            calibration: CalibrationKnobs::default(),
            alignment: AlignmentSetting::default(),
            baking: false,
            optimize: 1,
            edge_weight_bits: None,
            transformer_blocks: true,
            guard: GuardSetting::default(),
            isotone_calibration: IsotoneSetting::default(),
            equalization: EqualizationSetting::default(),
            ssd_equalization: SsdEqualizationSetting::default(),
            channel_split: ChannelSplitSetting::default(),
            smooth_quant: SmoothQuantSetting::default(),
            range_search: RangeSearchSetting::default(),
            bias_correction: BiasCorrectionSetting::default(),
            mixed_range_concat: MixedRangeConcatSetting::default(),
            adaround: ReconstructionSetting::default(),
            round_tuning: ReconstructionSetting::default(),
            block_reconstruction: ReconstructionSetting::default(),
            lsq: ReconstructionSetting::default(),
            gptq: Default::default(),
            awq: Default::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FusionSetting {
    /// Make Constant nodes initializers (weights stored in Constant nodes become weights).
    pub constant_fold: bool,
    /// Fold BatchNormalization into the preceding Conv/ConvTranspose/Gemm.
    pub bn_fold: bool,
    /// Computing op + activation share one output config (`quant_fusion`).
    pub quant_fusion: bool,
    /// Activation types the target fuses.
    pub activations: Vec<String>,
}

impl Default for FusionSetting {
    fn default() -> Self {
        Self { constant_fold: true, bn_fold: true, quant_fusion: true, activations: vec!["Relu".into(), "Clip".into()] }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CalibrationKnobs {
    /// Observer for every activation (default: each quantizer's choice).
    pub observer: Option<ObserverKind>,
    /// Use at most this many calibration batches (default: all).
    pub steps: Option<usize>,
    /// `percentile` observer: fraction of values kept, in [0.5, 1].
    pub percentile: f64,
    /// Histogram bins of histogram observers.
    pub bins: usize,
    /// `constant` observer: the fixed range.
    pub constant_range: Option<(f32, f32)>,
    /// `isotone` observer: the class axis (default: last).
    pub isotone_axis: Option<usize>,
}

impl Default for CalibrationKnobs {
    fn default() -> Self {
        let o = ObserverOptions::default();
        Self {
            observer: None,
            steps: None,
            percentile: o.percentile,
            bins: o.bins,
            constant_range: o.constant_range,
            isotone_axis: o.isotone_axis,
        }
    }
}

impl CalibrationKnobs {
    pub fn observer_options(&self) -> ObserverOptions {
        ObserverOptions {
            bins: self.bins,
            percentile: self.percentile,
            constant_range: self.constant_range,
            isotone_axis: self.isotone_axis,
        }
    }

    pub fn calibration_setting(&self) -> CalibrationSetting {
        CalibrationSetting { options: self.observer_options(), steps: self.steps }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlignmentSetting {
    pub concat: ConcatMode,
    /// Align Add's activation inputs (union of their ranges).
    pub add: bool,
    /// Outputs of `pooling_types` share their input's parameters.
    pub pooling: bool,
    /// Default (absent): the relay ops of the operator-role table (MaxPool, Resize, reshapes, …:
    /// ops that only select values; averaging pools get their own scale, see `quant_alignment`).
    pub pooling_types: Option<Vec<String>>,
}

impl Default for AlignmentSetting {
    fn default() -> Self {
        let a = QuantAlignment::default();
        Self { concat: a.concat, add: a.add, pooling: a.pooling, pooling_types: a.pooling_types }
    }
}

impl PipelineSetting {
    /// Whether the pass `name` runs: its own `enabled`, else whether `optimize` reaches its level.
    pub fn runs(&self, name: &str, enabled: Option<bool>) -> bool {
        let level = PASS_LEVELS.iter().find(|(n, _)| *n == name).map_or(BY_NAME_ONLY, |(_, l)| *l);
        enabled.unwrap_or(self.optimize >= level)
    }

    /// The guard's options for a [`crate::PassContext`].
    pub fn guard_options(&self) -> GuardOptions {
        GuardOptions { enabled: self.guard.enabled, batches: self.guard.batches, min_gain_db: self.guard.min_gain_db }
    }

    /// Checks values serde cannot (ranges of numbers).
    pub fn validate(&self) -> Result<()> {
        if self.optimize > MAX_OPTIMIZE {
            return Err(PassError::Setting(format!(
                "optimize = {}: use 0 (calibration only), 1 (the default), 2 (+ equalization, SmoothQuant, range \
                 search, bias correction) or 3 (+ block reconstruction)",
                self.optimize
            )));
        }
        if let Some(bits) = self.edge_weight_bits.filter(|b| !(2..=16).contains(b)) {
            return Err(PassError::Setting(format!("edge_weight_bits = {bits}: use 2–16 (8 is usual)")));
        }
        if !self.guard.min_gain_db.is_finite() {
            return Err(PassError::Setting(format!(
                "guard.min_gain_db = {}: use a finite number",
                self.guard.min_gain_db
            )));
        }
        if self.guard.batches == 0 {
            return Err(PassError::Setting("guard.batches = 0: use at least 1".into()));
        }
        // The simulation computes a fused pair as one kernel only for the role table's linear
        // activations: fusing anything else would quantize differently from what it exports.
        let fusable = mppq_ir::types_in_class(mppq_ir::OpClass::LinearActivation);
        if let Some(bad) = self.fusion.activations.iter().find(|a| !fusable.contains(&a.as_str())) {
            return Err(PassError::Setting(format!(
                "fusion.activations: `{bad}` is not an activation a computing op can be fused with; use any of {}",
                fusable.join(", ")
            )));
        }
        let sq = &self.smooth_quant;
        if !(0.0..=1.0).contains(&sq.alpha) {
            return Err(PassError::Setting(format!("smooth_quant.alpha = {}: use a value in [0, 1]", sq.alpha)));
        }
        if !(0.0..=1.0).contains(&sq.transformer_alpha) {
            return Err(PassError::Setting(format!(
                "smooth_quant.transformer_alpha = {}: use a value in [0, 1]",
                sq.transformer_alpha
            )));
        }
        let split = self.channel_split.ratio;
        if !(split > 0.0 && split <= 1.0) {
            return Err(PassError::Setting(format!("channel_split.ratio = {split}: use a value in (0, 1]")));
        }
        let eq = &self.equalization;
        if !(eq.max_scale.is_finite() && eq.max_scale >= 1.0) {
            return Err(PassError::Setting(format!(
                "equalization.max_scale = {}: use a finite 1 or more",
                eq.max_scale
            )));
        }
        // Counts that drive loops have a ceiling: a mistyped 10^12 would run for days.
        count("equalization.iterations", eq.iterations, 1_000)?;
        at_least("equalization.bias_multiplier", f64::from(eq.bias_multiplier), 0.0)?;
        at_least("equalization.act_multiplier", f64::from(eq.act_multiplier), 0.0)?;
        count("ssd_equalization.iterations", self.ssd_equalization.iterations, 1_000)?;
        at_least("ssd_equalization.loss_threshold", self.ssd_equalization.loss_threshold, 0.0)?;
        count("channel_split.rounds", self.channel_split.rounds, 100)?;
        at_least("smooth_quant.min_outlier_ratio", f64::from(sq.min_outlier_ratio), 0.0)?;
        count("bias_correction.rounds", self.bias_correction.rounds, 100)?;
        count("bias_correction.batches", self.bias_correction.batches, 1_000_000)?;
        at_least("mixed_range_concat.ratio", f64::from(self.mixed_range_concat.ratio), 1.0)?;
        if let Some(p) = self.range_search.percentiles.iter().flatten().find(|p| !(0.5..=1.0).contains(*p)) {
            return Err(PassError::Setting(format!("range_search.percentiles: {p}: use values in [0.5, 1]")));
        }
        if self.range_search.observers.as_ref().is_some_and(Vec::is_empty)
            || self.range_search.percentiles.as_ref().is_some_and(Vec::is_empty)
        {
            return Err(PassError::Setting(
                "range_search: an empty list of observers or percentiles: leave the key out for the defaults".into(),
            ));
        }
        for (section, s) in [
            ("adaround", &self.adaround),
            ("round_tuning", &self.round_tuning),
            ("block_reconstruction", &self.block_reconstruction),
            ("lsq", &self.lsq),
        ] {
            s.validate(section).map_err(PassError::Setting)?;
        }
        let c = &self.calibration;
        c.observer_options().validate().map_err(|m| PassError::Setting(format!("calibration.{m}")))?;
        if c.steps == Some(0) {
            return Err(PassError::Setting(
                "calibration.steps = 0: use at least 1, or leave it out for all batches".into(),
            ));
        }
        Ok(())
    }

    /// Parses a JSON setting (missing keys take defaults) and validates it.
    pub fn from_json(text: &str) -> Result<Self> {
        let s: Self = serde_json::from_str(text).map_err(|e| PassError::Setting(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }
}

/// A count that drives a loop: from 1 to `max`.
fn count(key: &str, value: usize, max: usize) -> Result<()> {
    if (1..=max).contains(&value) { Ok(()) } else { Err(PassError::Setting(format!("{key} = {value}: use 1–{max}"))) }
}

/// A finite number of at least `least`.
fn at_least(key: &str, value: f64, least: f64) -> Result<()> {
    if value.is_finite() && value >= least {
        Ok(())
    } else {
        Err(PassError::Setting(format!("{key} = {value}: use a finite number ≥ {least}")))
    }
}
