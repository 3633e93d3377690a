//! The pipeline: the built-in passes in their order, chosen by a [`PipelineSetting`], and a
//! runner that reports progress per pass and stops at the first error.

use crate::calibration::mixed_range_concat::MixedRangeConcat;
use crate::calibration::parameter_baking::ParameterBaking;
use crate::calibration::parameter_quantize::ParameterQuantize;
use crate::calibration::passive_parameter_quantize::PassiveParameterQuantize;
use crate::calibration::quant_alignment::QuantAlignment;
use crate::calibration::runtime_calibration::RuntimeCalibration;
use crate::configuration::dispatch::Dispatch;
use crate::configuration::edge_layers::EdgeLayers;
use crate::configuration::init_quantization::InitQuantization;
use crate::configuration::transformer_blocks::TransformerBlocks;
use crate::error::Result;
use crate::optimisation::bias_correction::BiasCorrection;
use crate::optimisation::channel_split::ChannelSplit;
use crate::optimisation::equalization::Equalization;
use crate::optimisation::isotone_calibration::IsotoneCalibration;
use crate::optimisation::smooth_quant::SmoothQuant;
use crate::optimisation::ssd_equalization::SsdEqualization;
use crate::runtime::guard::{Guard, GuardOutcome, GuardState};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::statistics::{Statistics, collect_statistics};
use crate::setting::PipelineSetting;
use crate::structural::fold_batchnorm::FoldBatchNorm;
use crate::structural::fold_constants::FoldConstants;
use crate::structural::quant_fusion::QuantFusion;
use crate::structural::redundant_quant_simplify::RedundantQuantSimplify;
use crate::training::adaround::AdaRound;
use crate::training::block_reconstruction::BlockReconstruction;
use crate::training::lsq::Lsq;
use crate::training::round_tuning::RoundTuning;
use mppq_quant::quantizer::Quantizer;
use std::sync::Arc;
use std::time::Instant;

/// Builds pass lists from settings: the one list of the quantization run, in one place.
pub struct Pipeline;

/// Passes a caller (the API, a user's crate) adds to the run at named stages of
/// [`Pipeline::full`]: the pipeline places them, nobody splices a list by pass name.
#[derive(Default)]
pub struct StagePasses {
    /// Right after the quantizer gave every operation its initial configs (`init_quantization`),
    /// before anything reads them: config edits a target needs (per-tensor weights below opset
    /// 13) and checks of what a later step will refuse (the export preflight), so that a model is
    /// refused before calibration, not after it.
    pub after_configs: Vec<Box<dyn Pass>>,
    /// Right after the activations are calibrated (`runtime_calibration`, in the guard's
    /// calibration chain), before alignment and everything that reads calibrated values:
    /// values that replace calibrated ones (ranges imported from another tool).
    pub after_calibration: Vec<Box<dyn Pass>>,
}

impl Pipeline {
    /// The whole run, front to back: fold_constants → fold_batchnorm → dispatch → init_quantization →
    /// edge_layers (when `edge_weight_bits` is set) → quant_fusion → redundant_quant_simplify →
    /// parameter_quantize → runtime_calibration → quant_alignment → passive_parameter_quantize
    /// (after alignment: biases use the aligned input scales) → parameter_baking. Structural passes come before dispatch, which decides per final
    /// operation. A step switched off in `setting` is left out; `stages` are placed at their
    /// named stage ([`StagePasses`]).
    pub fn full(
        setting: &PipelineSetting,
        dispatch: Dispatch,
        quantizer: Arc<dyn Quantizer>,
        stages: StagePasses,
    ) -> Result<Vec<Box<dyn Pass>>> {
        Self::build(setting, Some((dispatch, quantizer)), stages)
    }

    /// The run for a graph whose operations were already dispatched and configured: the list
    /// of [`Self::full`] without `dispatch` and `init_quantization`.
    pub fn from_setting(setting: &PipelineSetting) -> Result<Vec<Box<dyn Pass>>> {
        Self::build(setting, None, StagePasses::default())
    }

    /// The front of [`Self::full`] up to and including its `dispatch` step (the structural
    /// passes, then the dispatch): what `mppq dispatch` runs to show the precisions `quantize`
    /// will use.
    pub fn until_dispatch(setting: &PipelineSetting, dispatch: Dispatch) -> Result<Vec<Box<dyn Pass>>> {
        setting.validate()?;
        let mut passes = Self::structural(setting);
        passes.push(Box::new(dispatch));
        Ok(passes)
    }

    /// The structural passes that come before dispatch, which decides per final operation.
    fn structural(setting: &PipelineSetting) -> Vec<Box<dyn Pass>> {
        let mut passes: Vec<Box<dyn Pass>> = Vec::new();
        if setting.fusion.constant_fold {
            passes.push(Box::new(FoldConstants));
        }
        if setting.fusion.bn_fold {
            passes.push(Box::new(FoldBatchNorm));
        }
        passes
    }

    fn build(
        setting: &PipelineSetting,
        front: Option<(Dispatch, Arc<dyn Quantizer>)>,
        stages: StagePasses,
    ) -> Result<Vec<Box<dyn Pass>>> {
        let StagePasses { after_configs, after_calibration } = stages;
        setting.validate()?;
        let mut passes = Self::structural(setting);
        if let Some((dispatch, quantizer)) = front {
            passes.push(Box::new(dispatch));
            passes.push(Box::new(InitQuantization { quantizer }));
            passes.extend(after_configs);
            if let Some(weight_bits) = setting.edge_weight_bits {
                passes.push(Box::new(EdgeLayers { weight_bits }));
            }
        }
        if setting.fusion.quant_fusion {
            passes.push(Box::new(QuantFusion { activations: setting.fusion.activations.clone() }));
        }
        if setting.redundant_simplify {
            passes.push(Box::new(RedundantQuantSimplify));
        }
        // Optimisations of the float graph and of the observers, each checked by recalibrating.
        if setting.transformer_blocks {
            passes.push(Box::new(TransformerBlocks));
        }
        if setting.runs("isotone_calibration", setting.isotone_calibration.enabled) {
            passes.push(Box::new(IsotoneCalibration));
        }
        if setting.runs("equalization", setting.equalization.enabled) {
            passes.push(Box::new(Equalization { setting: setting.equalization.clone() }));
        }
        if setting.runs("ssd_equalization", setting.ssd_equalization.enabled) {
            passes.push(Box::new(SsdEqualization { setting: setting.ssd_equalization.clone() }));
        }
        if setting.runs("channel_split", setting.channel_split.enabled) {
            passes.push(Box::new(ChannelSplit { setting: setting.channel_split.clone() }));
        }
        // At level 1 (unless told otherwise) for transformer graphs only.
        let smooth_all = setting.runs("smooth_quant", setting.smooth_quant.enabled);
        let smooth_transformers =
            setting.smooth_quant.enabled.is_none() && setting.transformer_blocks && setting.optimize >= 1;
        if smooth_all || smooth_transformers {
            passes
                .push(Box::new(SmoothQuant { setting: setting.smooth_quant.clone(), only_transformers: !smooth_all }));
        }
        // Block-wise (weight-only) weights: activation-aware scales before they are calibrated.
        if setting.runs("awq", setting.awq.enabled) {
            passes.push(Box::new(crate::weight_only::awq::Awq { setting: setting.awq.clone() }));
        }
        let mut prefetch_histograms = false;
        if setting.runs("range_search", setting.range_search.enabled) {
            let c = &setting.calibration;
            for candidate in setting.range_search.candidates_at(setting.optimize, c.percentile, c.bins) {
                prefetch_histograms |= mppq_quant::observer::collects_signed_histogram(candidate.observer);
                passes.push(Box::new(candidate));
            }
        }
        let calibration = &setting.calibration;
        passes.push(Box::new(ParameterQuantize { options: calibration.observer_options() }));
        passes.push(Box::new(RuntimeCalibration {
            setting: calibration.calibration_setting(),
            observer: calibration.observer,
            prefetch_histograms,
        }));
        passes.extend(after_calibration);
        if setting.runs("mixed_range_concat", setting.mixed_range_concat.enabled) {
            passes.push(Box::new(MixedRangeConcat { setting: setting.mixed_range_concat.clone() }));
        }
        let a = &setting.alignment;
        passes.push(Box::new(QuantAlignment {
            concat: a.concat,
            add: a.add,
            pooling: a.pooling,
            pooling_types: a.pooling_types.clone(),
        }));
        passes.push(Box::new(PassiveParameterQuantize));
        // Block-wise (weight-only) weights: GPTQ's codes instead of round-to-nearest.
        if setting.runs("gptq", setting.gptq.enabled) {
            passes.push(Box::new(crate::weight_only::gptq::Gptq { setting: setting.gptq.clone() }));
        }
        // Optimisations of calibrated parameters, each measured directly: training first (it
        // rewrites weights and scales), then bias correction of what remains.
        if setting.runs("adaround", setting.adaround.enabled) {
            passes.push(Box::new(AdaRound { setting: setting.adaround.clone() }));
        }
        if setting.runs("round_tuning", setting.round_tuning.enabled) {
            passes.push(Box::new(RoundTuning { setting: setting.round_tuning.clone() }));
        }
        if setting.runs("block_reconstruction", setting.block_reconstruction.enabled) {
            passes.push(Box::new(BlockReconstruction { setting: setting.block_reconstruction.clone() }));
        }
        if setting.runs("lsq", setting.lsq.enabled) {
            passes.push(Box::new(Lsq { setting: setting.lsq.clone() }));
        }
        if setting.runs("bias_correction", setting.bias_correction.enabled) {
            passes.push(Box::new(BiasCorrection { setting: setting.bias_correction.clone() }));
        }
        if setting.baking {
            passes.push(Box::new(ParameterBaking));
        }
        Ok(passes)
    }
}

/// Runs `passes` in order and stops at the first error. Before each pass the statistics it
/// declares ([`Pass::statistics`]) are collected into [`PassContext::statistics`] (one run over
/// the calibration data per graph mode); each pass gets a progress task (`pass i/n: name`) and its
/// wall time in its report.
///
/// Guarded passes ([`Pass::guard`], see [`crate::runtime::guard`]) are checked unless `ctx.guard` is off:
/// a run of [`Guard::Recalibrate`] passes is followed by the calibration passes up to the next
/// [`Guard::Measure`] pass; these run once on the graph as it is (the baseline), then again after
/// each transform, and a transform whose calibrated result does not raise the output SNR over the
/// best so far by `ctx.guard.min_gain_db` is undone. A [`Guard::Measure`] pass is undone on the
/// same rule. Undone passes say so in their report.
pub fn run_pipeline(ctx: &mut PassContext<'_>, passes: &mut [Box<dyn Pass>]) -> Result<Vec<PassReport>> {
    let total = passes.len();
    let mut reports = Vec::with_capacity(total);
    let mut guard = GuardState::default();
    let mut i = 0;
    while i < total {
        let guarded = ctx.guard.enabled;
        if passes[i].guard() != Guard::None && ctx.float_reference.is_none() {
            ctx.float_reference = Some(ctx.graph.clone());
        }
        match passes[i].guard() {
            Guard::Recalibrate if guarded => {
                let transforms_end = (i..total).find(|&j| passes[j].guard() != Guard::Recalibrate).unwrap_or(total);
                let chain_end = (transforms_end..total).find(|&j| passes[j].guard() != Guard::None).unwrap_or(total);
                let (transforms, chain) = passes[i..chain_end].split_at_mut(transforms_end - i);
                let first = i + 1;
                reports.extend(run_transforms(ctx, transforms, chain, first, total, &mut guard)?);
                i = chain_end;
            }
            Guard::Measure if guarded => {
                let mut snapshot = ctx.graph.clone();
                let started = Instant::now();
                let mut report = run_one(ctx, passes[i].as_mut(), i + 1, total)?;
                if report.changed > 0 {
                    // The baseline is measured only for a pass that changed something (on the
                    // graph as it was), so a pass with nothing to do on this graph costs nothing.
                    let before = match guard.current_db {
                        Some(db) => db,
                        None => {
                            std::mem::swap(ctx.graph, &mut snapshot);
                            let before = guard.current(ctx, passes[i].name());
                            std::mem::swap(ctx.graph, &mut snapshot);
                            before?
                        }
                    };
                    let after = guard.measure(ctx, passes[i].name())?;
                    let kept = ctx.guard.keeps(before, after);
                    if kept {
                        guard.current_db = Some(after);
                    } else {
                        *ctx.graph = snapshot;
                    }
                    report.guard = Some(GuardOutcome { before_db: before, after_db: after, kept });
                }
                report.seconds = started.elapsed().as_secs_f64();
                reports.push(report);
                i += 1;
            }
            _ => {
                // Any other change: the next guarded pass measures its baseline anew.
                guard.current_db = None;
                reports.push(run_one(ctx, passes[i].as_mut(), i + 1, total)?);
                i += 1;
            }
        }
    }
    Ok(reports)
}

/// Runs one pass: its statistics, a progress task, its wall time.
fn run_one(ctx: &mut PassContext<'_>, pass: &mut dyn Pass, index: usize, total: usize) -> Result<PassReport> {
    let started = Instant::now();
    let requests = pass.statistics(ctx.graph)?;
    ctx.statistics =
        if requests.is_empty() { Statistics::default() } else { collect_statistics(ctx, pass.name(), &requests)? };
    ctx.progress.begin(&format!("pass {index}/{total}: {}", pass.name()), 1);
    let report = pass.run(ctx);
    ctx.progress.advance(1);
    ctx.progress.finish();
    let mut report = report?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Runs `chain` (the calibration passes) on the graph; returns their reports.
fn run_chain(
    ctx: &mut PassContext<'_>,
    chain: &mut [Box<dyn Pass>],
    first: usize,
    total: usize,
) -> Result<Vec<PassReport>> {
    chain.iter_mut().enumerate().map(|(k, p)| run_one(ctx, p.as_mut(), first + k, total)).collect()
}

/// The guarded transforms and the calibration chain after them (see [`run_pipeline`]). On
/// return `ctx.graph` is the calibrated graph with every kept transform.
fn run_transforms(
    ctx: &mut PassContext<'_>,
    transforms: &mut [Box<dyn Pass>],
    chain: &mut [Box<dyn Pass>],
    first: usize,
    total: usize,
    guard: &mut GuardState,
) -> Result<Vec<PassReport>> {
    let chain_first = first + transforms.len();
    // `accepted`: the uncalibrated graph with the transforms kept so far; `ctx.graph`: the same,
    // calibrated.
    let mut accepted = ctx.graph.clone();
    let mut accepted_percentile = ctx.percentile;
    let mut chain_reports = run_chain(ctx, chain, chain_first, total)?;
    let baseline_seconds: f64 = chain_reports.iter().map(|r| r.seconds).sum();
    // The first transform measured against the baseline, and whether a kept transform's chain
    // replaced the baseline's (see the end).
    let (mut first_measured, mut replaced) = (None, false);
    // The baseline is measured only once a transform changed something.
    let mut best: Option<f64> = guard.current_db;
    let mut reports = Vec::with_capacity(transforms.len() + chain.len());
    for (k, transform) in transforms.iter_mut().enumerate() {
        let started = Instant::now();
        let mut calibrated = accepted.clone();
        std::mem::swap(ctx.graph, &mut calibrated);
        let mut report = run_one(ctx, transform.as_mut(), first + k, total)?;
        if report.changed == 0 {
            std::mem::swap(ctx.graph, &mut calibrated);
        } else {
            first_measured.get_or_insert(k);
            let before = match best {
                Some(db) => db,
                None => {
                    std::mem::swap(ctx.graph, &mut calibrated);
                    let db = guard.measure(ctx, transform.name())?;
                    std::mem::swap(ctx.graph, &mut calibrated);
                    db
                }
            };
            let transformed = ctx.graph.clone();
            let candidate_reports = run_chain(ctx, chain, chain_first, total)?;
            let after = guard.measure(ctx, transform.name())?;
            let kept = ctx.guard.keeps(before, after);
            report.guard = Some(GuardOutcome { before_db: before, after_db: after, kept });
            if kept {
                accepted = transformed;
                accepted_percentile = ctx.percentile;
                best = Some(after);
                chain_reports = candidate_reports;
                replaced = true;
            } else {
                best = Some(before);
                *ctx.graph = calibrated;
                ctx.percentile = accepted_percentile;
            }
        }
        report.seconds = started.elapsed().as_secs_f64();
        reports.push(report);
    }
    guard.current_db = best;
    // Every second is reported once: a kept transform's calibration chain ran (and was timed)
    // inside that transform's report, and the baseline chain it replaced is charged to the first
    // transform measured against it.
    if replaced {
        if let Some(first) = first_measured.and_then(|k| reports.get_mut(k)) {
            first.seconds += baseline_seconds;
        }
        for r in &mut chain_reports {
            r.seconds = 0.0;
            r.summary.push_str(" (timed with the kept pass above)");
        }
    }
    reports.extend(chain_reports);
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass that only has a name, to see where a stage puts it.
    struct Marker(&'static str);

    impl Pass for Marker {
        fn name(&self) -> &'static str {
            self.0
        }
        fn run(&mut self, _: &mut PassContext<'_>) -> Result<PassReport> {
            Ok(PassReport::new(self.0, 0, ""))
        }
    }

    #[test]
    fn stage_passes_sit_at_their_stages() {
        let quantizer: Arc<dyn Quantizer> = mppq_quant::quantizer::quantizer_by_name("default").unwrap().into();
        let context =
            mppq_dispatch::DispatchContext::new(quantizer.target_precision(), quantizer.quant_operation_types());
        let dispatch = Dispatch { dispatcher: "conservative".into(), context };
        let stages = StagePasses {
            after_configs: vec![Box::new(Marker("first")), Box::new(Marker("second"))],
            after_calibration: vec![Box::new(Marker("third"))],
        };
        let setting = PipelineSetting { edge_weight_bits: Some(8), ..PipelineSetting::default() };
        let passes = Pipeline::full(&setting, dispatch, quantizer, stages).unwrap();
        let names: Vec<&str> = passes.iter().map(|p| p.name()).collect();
        let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
        assert_eq!(at("first"), at("init_quantization") + 1, "{names:?}");
        assert_eq!(at("second"), at("first") + 1, "{names:?}");
        assert_eq!(at("edge_layers"), at("second") + 1, "{names:?}");
        assert_eq!(at("third"), at("runtime_calibration") + 1, "{names:?}");
    }

    fn names(setting: &PipelineSetting) -> Vec<&'static str> {
        Pipeline::from_setting(setting).unwrap().iter().map(|p| p.name()).collect()
    }

    #[test]
    fn default_order_and_switches() {
        assert_eq!(
            names(&PipelineSetting::default()),
            [
                "fold_constants",
                "fold_batchnorm",
                "quant_fusion",
                "redundant_quant_simplify",
                "transformer_blocks",
                "isotone_calibration",
                "smooth_quant",
                "range_search",
                "range_search",
                "parameter_quantize",
                "runtime_calibration",
                "mixed_range_concat",
                "quant_alignment",
                "passive_parameter_quantize",
                "gptq"
            ]
        );
        let level = |optimize: u8| PipelineSetting { optimize, ..PipelineSetting::default() };
        assert!(!names(&level(0)).contains(&"isotone_calibration"));
        assert_eq!(
            names(&level(2))[5..11],
            ["isotone_calibration", "equalization", "smooth_quant", "range_search", "range_search", "range_search"]
        );
        assert_eq!(names(&level(2)).last(), Some(&"bias_correction"));
        let s = PipelineSetting::from_json(r#"{"optimize": 0, "equalization": {"enabled": true}}"#).unwrap();
        assert!(names(&s).contains(&"equalization") && !names(&s).contains(&"isotone_calibration"));
        assert!(names(&level(3)).contains(&"block_reconstruction") && !names(&level(3)).contains(&"adaround"));
        let err = PipelineSetting::from_json(r#"{"optimize": 4}"#).unwrap_err().to_string();
        assert!(err.contains("optimize = 4") && err.contains("3 (+ block reconstruction)"), "{err}");
        let err = PipelineSetting::from_json(r#"{"adaround": {"drop": 1.5}}"#).unwrap_err().to_string();
        assert!(err.contains("adaround.drop = 1.5"), "{err}");
        let json = r#"{"fusion": {"constant_fold": false, "bn_fold": false, "quant_fusion": false}, "redundant_simplify": false, "baking": true}"#;
        let s = PipelineSetting::from_json(json).unwrap();
        assert_eq!(
            names(&s),
            [
                "transformer_blocks",
                "isotone_calibration",
                "smooth_quant",
                "range_search",
                "range_search",
                "parameter_quantize",
                "runtime_calibration",
                "mixed_range_concat",
                "quant_alignment",
                "passive_parameter_quantize",
                "gptq",
                "parameter_baking"
            ]
        );
    }

    #[test]
    fn settings_parse_and_reject_unknown_keys() {
        let s = PipelineSetting::from_json(r#"{"calibration": {"observer": "percentile", "percentile": 0.999, "steps": 4}, "alignment": {"concat": "union_range", "add": true}}"#).unwrap();
        assert_eq!(s.calibration.percentile, 0.999);
        assert_eq!(s.calibration.steps, Some(4));
        assert_eq!(s.alignment.concat, crate::ConcatMode::UnionRange);
        assert!(s.alignment.add && s.alignment.pooling);
        let err = PipelineSetting::from_json(r#"{"bakeing": true}"#).unwrap_err().to_string();
        assert!(err.contains("unknown field `bakeing`") && err.contains("baking"), "{err}");
        let err = PipelineSetting::from_json(r#"{"alignment": {"concat": "average"}}"#).unwrap_err().to_string();
        assert!(err.contains("average") && err.contains("union_range"), "{err}");
        let err = PipelineSetting::from_json(r#"{"calibration": {"percentile": 2.0}}"#).unwrap_err().to_string();
        assert!(err.contains("calibration.percentile = 2"), "{err}");
        let err = PipelineSetting::from_json(r#"{"calibration": {"observer": "best"}}"#).unwrap_err().to_string();
        assert!(err.contains("`best`") && err.contains("minmax"), "{err}");
        let err =
            PipelineSetting::from_json(r#"{"fusion": {"activations": ["Relu", "Swish"]}}"#).unwrap_err().to_string();
        assert!(err.contains("`Swish`") && err.contains("Clip"), "{err}");
        let json = serde_json::to_string(&PipelineSetting::default()).unwrap();
        assert_eq!(PipelineSetting::from_json(&json).unwrap(), PipelineSetting::default());
    }
}
