//! The pipeline: the built-in passes in their order, chosen by a [`PipelineSetting`], and a
//! runner that reports progress per pass and stops at the first error.

use crate::dispatch::Dispatch;
use crate::error::Result;
use crate::fold_batchnorm::FoldBatchNorm;
use crate::fold_constants::FoldConstants;
use crate::init_quantization::InitQuantization;
use crate::parameter_baking::ParameterBaking;
use crate::parameter_quantize::ParameterQuantize;
use crate::pass::{Pass, PassContext, PassReport};
use crate::passive_parameter_quantize::PassiveParameterQuantize;
use crate::quant_alignment::QuantAlignment;
use crate::quant_fusion::QuantFusion;
use crate::redundant_quant_simplify::RedundantQuantSimplify;
use crate::runtime_calibration::RuntimeCalibration;
use crate::setting::PipelineSetting;
use crate::statistics::{Statistics, collect_statistics};
use mppq_quant::quantizer::Quantizer;
use std::sync::Arc;
use std::time::Instant;

/// Builds pass lists from settings: the one list of the quantization run, in one place.
pub struct Pipeline;

impl Pipeline {
    /// The whole run, front to back: fold_constants → fold_batchnorm → dispatch → init_quantization →
    /// quant_fusion → redundant_quant_simplify → parameter_quantize → runtime_calibration →
    /// quant_alignment → passive_parameter_quantize (after alignment: biases use the aligned input
    /// scales) → parameter_baking. Structural passes come before dispatch, which decides per final
    /// operation. A step switched off in `setting` is left out.
    pub fn full(
        setting: &PipelineSetting,
        dispatch: Dispatch,
        quantizer: Arc<dyn Quantizer>,
    ) -> Result<Vec<Box<dyn Pass>>> {
        Self::build(setting, Some((dispatch, quantizer)))
    }

    /// The run for a graph whose operations were already dispatched and configured: the list
    /// of [`Self::full`] without `dispatch` and `init_quantization`.
    pub fn from_setting(setting: &PipelineSetting) -> Result<Vec<Box<dyn Pass>>> {
        Self::build(setting, None)
    }

    fn build(setting: &PipelineSetting, front: Option<(Dispatch, Arc<dyn Quantizer>)>) -> Result<Vec<Box<dyn Pass>>> {
        setting.validate()?;
        let mut passes: Vec<Box<dyn Pass>> = Vec::new();
        if setting.fusion.constant_fold {
            passes.push(Box::new(FoldConstants));
        }
        if setting.fusion.bn_fold {
            passes.push(Box::new(FoldBatchNorm));
        }
        if let Some((dispatch, quantizer)) = front {
            passes.push(Box::new(dispatch));
            passes.push(Box::new(InitQuantization { quantizer }));
        }
        if setting.fusion.quant_fusion {
            passes.push(Box::new(QuantFusion { activations: setting.fusion.activations.clone() }));
        }
        if setting.redundant_simplify {
            passes.push(Box::new(RedundantQuantSimplify));
        }
        let calibration = &setting.calibration;
        passes.push(Box::new(ParameterQuantize { options: calibration.observer_options() }));
        passes.push(Box::new(RuntimeCalibration {
            setting: calibration.calibration_setting(),
            observer: calibration.observer,
        }));
        let a = &setting.alignment;
        passes.push(Box::new(QuantAlignment {
            concat: a.concat,
            add: a.add,
            pooling: a.pooling,
            pooling_types: a.pooling_types.clone(),
        }));
        passes.push(Box::new(PassiveParameterQuantize));
        if setting.baking {
            passes.push(Box::new(ParameterBaking));
        }
        Ok(passes)
    }
}

/// Runs `passes` in order. Before each pass the statistics it declares ([`Pass::statistics`])
/// are collected into [`PassContext::statistics`] (one run over the calibration data per graph
/// mode); each pass gets a progress task (`pass i/n: name`) of one step (passes with their own
/// progress, like calibration, open tasks of their own) and its wall time in its report. Stops at
/// the first error.
pub fn run_pipeline(ctx: &mut PassContext<'_>, passes: &mut [Box<dyn Pass>]) -> Result<Vec<PassReport>> {
    let total = passes.len();
    let mut reports = Vec::with_capacity(total);
    for (i, pass) in passes.iter_mut().enumerate() {
        let started = Instant::now();
        let requests = pass.statistics(ctx.graph)?;
        ctx.statistics =
            if requests.is_empty() { Statistics::default() } else { collect_statistics(ctx, pass.name(), &requests)? };
        ctx.progress.begin(&format!("pass {}/{total}: {}", i + 1, pass.name()), 1);
        let report = pass.run(ctx);
        ctx.progress.advance(1);
        ctx.progress.finish();
        let mut report = report?;
        report.seconds = started.elapsed().as_secs_f64();
        reports.push(report);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "parameter_quantize",
                "runtime_calibration",
                "quant_alignment",
                "passive_parameter_quantize"
            ]
        );
        let json = r#"{"fusion": {"constant_fold": false, "bn_fold": false, "quant_fusion": false}, "redundant_simplify": false, "baking": true}"#;
        let s = PipelineSetting::from_json(json).unwrap();
        assert_eq!(
            names(&s),
            [
                "parameter_quantize",
                "runtime_calibration",
                "quant_alignment",
                "passive_parameter_quantize",
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
        let json = serde_json::to_string(&PipelineSetting::default()).unwrap();
        assert_eq!(PipelineSetting::from_json(&json).unwrap(), PipelineSetting::default());
    }
}
