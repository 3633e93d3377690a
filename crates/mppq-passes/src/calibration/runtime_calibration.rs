//! `runtime_calibration`: runs the calibration batches through the executor and calibrates
//! every undecided activation config with its observer (progress per batch), then copies the
//! calibrated parameters into the configs that share them (`sync_dominated`).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::{ObserverKind, QuantizationState, config_at_mut, sync_dominated};
use mppq_ir::quant::{configured_slots, variable_of};
use mppq_quant::calibrate::{CalibrationSetting, calibrate_activations_cached};

#[derive(Default)]
pub struct RuntimeCalibration {
    pub setting: CalibrationSetting,
    /// Use this observer for every activation config instead of the quantizer's choice.
    pub observer: Option<ObserverKind>,
    /// Collect histograms for min/max configs too (a second pass over the data), because
    /// histogram observers will be tried on the same graph (`range_search`) and then need no
    /// pass of their own.
    pub prefetch_histograms: bool,
}

impl Pass for RuntimeCalibration {
    fn name(&self) -> &'static str {
        "runtime_calibration"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        if let Some(kind) = self.observer {
            for loc in configured_slots(ctx.graph) {
                let is_param = variable_of(ctx.graph, loc)
                    .and_then(|v| ctx.graph.variable(v).ok())
                    .is_some_and(|v| v.is_parameter());
                if let Some(c) =
                    config_at_mut(ctx.graph, loc).filter(|c| c.state == QuantizationState::Initial && !is_param)
                {
                    c.observer = kind;
                }
            }
        }
        let mut setting = self.setting.clone();
        if let Some(p) = ctx.percentile {
            setting.options.percentile = p;
        }
        let exec = ctx.executor(self.name())?;
        let progress = &mut *ctx.progress;
        let cache = &mut ctx.observations;
        cache.prefetch_histograms = self.prefetch_histograms
            && crate::optimisation::range_search::histograms_over_budget(ctx.graph, setting.options.bins).is_none();
        let n = calibrate_activations_cached(ctx.graph, &exec, ctx.data, &setting, cache, |task, done, total| {
            if done == 1 {
                progress.begin(task, total as u64);
            }
            progress.advance(1);
            if done == total {
                progress.finish();
            }
        })
        .in_pass(self.name())?;
        let shared = sync_dominated(ctx.graph).in_pass(self.name())?;
        Ok(PassReport::new(
            self.name(),
            n,
            format!("{n} activation configs calibrated, {shared} shared copies updated"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::progress::RecordingProgress;
    use crate::structural::redundant_quant_simplify::RedundantQuantSimplify;
    use crate::test_graphs::{Harness, shared_input_concat_pool};
    use mppq_exec::OpRegistry;
    use mppq_ir::quant::location::{input, output};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    #[test]
    fn activation_ranges_cover_the_batches_and_shared_configs_copy_them() {
        let mut h = Harness::new(shared_input_concat_pool());
        h.calibration("x", &[1, 2, 4, 4], 3);
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.run_pass(&mut RedundantQuantSimplify);
        let mut progress = RecordingProgress::default();
        let registry = OpRegistry::builtin();
        let mut pass = RuntimeCalibration::default();
        let report = {
            let mut ctx = PassContext::new(&mut h.graph, &registry, &h.device, &|_| 17, &h.batches, &mut progress);
            pass.run(&mut ctx).unwrap()
        };
        assert_eq!(progress.events, ["begin calibration pass 1/1 3", "advance 1", "advance 1", "advance 1", "finish"]);
        // a.in, a.out, b.out, concat.out, pool.out; b.in shares a.in, the Concat and pool
        // inputs are overlapped by their producers.
        assert_eq!(report.changed, 5);
        let all: Vec<f32> = h.batches.iter().flat_map(|b| b[0].1.as_tensor().unwrap().to_f32_vec()).collect();
        let (lo, hi) = all.iter().fold((0f32, 0f32), |(l, u), v| (l.min(*v), u.max(*v)));
        let (a, b) = (h.op("a"), h.op("b"));
        let ca = h.config(input(a, 0));
        assert!((ca.scale[0] - (hi - lo) / 255.0).abs() < 1e-6, "{} vs {}", ca.scale[0], (hi - lo) / 255.0);
        let cb = h.config(input(b, 0));
        assert_eq!(
            (cb.scale.clone(), cb.offset.clone(), cb.state),
            (ca.scale.clone(), ca.offset.clone(), QuantizationState::Activated)
        );
        // Relu output: non-negative range, zero point 0.
        assert_eq!(h.config(output(a, 0)).offset, vec![0.0]);
    }

    #[test]
    fn an_empty_calibration_set_is_an_error() {
        let mut h = Harness::new(shared_input_concat_pool());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let err = h.try_pass(&mut RuntimeCalibration::default()).unwrap_err().to_string();
        assert!(err.contains("runtime_calibration") && err.contains("calibration set is empty"), "{err}");
    }
}
