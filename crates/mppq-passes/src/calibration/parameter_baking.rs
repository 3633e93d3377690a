//! `parameter_baking`: writes the fake-quantized value of every calibrated parameter (weights,
//! biases) into its initializer and marks the config `Baked` / `PassiveBaked`, so simulation
//! skips it (the parameter already holds its quantized value) and gives the same output as
//! before. A parameter read by more than one slot is left alone (its readers could disagree).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_exec::{Tensor, fake_quant_tensor};
use mppq_ir::quant::{ConfigSide, QuantizationState, config_at, config_at_mut};
use mppq_ir::quant::{configured_slots, variable_of};
use mppq_ir::{DataType, TensorData};

pub struct ParameterBaking;

impl Pass for ParameterBaking {
    fn name(&self) -> &'static str {
        "parameter_baking"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let (mut baked, mut shared) = (0, 0);
        for loc in configured_slots(ctx.graph) {
            let Some(config) = config_at(ctx.graph, loc) else { continue };
            let next = match config.state {
                QuantizationState::Activated => QuantizationState::Baked,
                QuantizationState::Passive => QuantizationState::PassiveBaked,
                _ => continue,
            };
            let Some(var) = variable_of(ctx.graph, loc).filter(|_| loc.side == ConfigSide::Input) else { continue };
            let v = ctx.graph.variable(var).in_pass(self.name())?;
            let Some(value) = v.value.as_ref().filter(|t| t.dtype() == DataType::Float) else { continue };
            if v.consumers().len() != 1 {
                shared += 1;
                continue;
            }
            let shape = value.shape().to_vec();
            let tensor = Tensor::from_f32(&shape, value.to_f32_vec().in_pass(self.name())?, ctx.device);
            let quantized = fake_quant_tensor(tensor, config).in_pass(self.name())?.to_f32_vec();
            let data = TensorData::from_vec(shape, &quantized).in_pass(self.name())?;
            ctx.graph.variable_mut(var).in_pass(self.name())?.value = Some(data);
            if let Some(c) = config_at_mut(ctx.graph, loc) {
                c.state = next;
            }
            baked += 1;
        }
        Ok(PassReport::new(
            self.name(),
            baked,
            format!("{baked} parameters baked, {shared} shared parameters left unbaked"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::pipeline::{Pipeline, run_pipeline};
    use crate::setting::PipelineSetting;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_ir::quant::location::input;
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    #[test]
    fn baking_keeps_the_simulation_identical() {
        let mut h = Harness::new(conv_relu_conv());
        h.calibration("x", &[1, 2, 4, 4], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let setting = PipelineSetting { baking: false, ..Default::default() };
        let mut passes = Pipeline::from_setting(&setting).unwrap();
        let mut progress = crate::NoProgress;
        let registry = mppq_exec::OpRegistry::builtin();
        {
            let mut ctx = PassContext::new(&mut h.graph, &registry, &h.device, &|_| 17, &h.batches, &mut progress);
            run_pipeline(&mut ctx, &mut passes).unwrap();
        }
        let x = h.input("x", &[1, 2, 4, 4], 7.0);
        let (fp, before) = (h.run_fp32(&x), h.run_sim(&x));
        assert_ne!(fp, before, "the simulation quantizes");
        let report = h.run_pass(&mut ParameterBaking);
        assert_eq!(report.changed, 4, "two weights and two biases: {report}");
        let conv1 = h.op("conv1");
        assert_eq!(h.config(input(conv1, 1)).state, QuantizationState::Baked);
        assert_eq!(h.config(input(conv1, 2)).state, QuantizationState::PassiveBaked);
        assert_eq!(h.run_sim(&x), before);
        // The weight now lies on its per-channel grid.
        let w = h
            .graph
            .variable(h.graph.var_named("conv1.w").unwrap())
            .unwrap()
            .value
            .clone()
            .unwrap()
            .to_f32_vec()
            .unwrap();
        let s = h.config(input(conv1, 1)).scale.clone();
        for (i, v) in w.iter().enumerate() {
            let q = v / s[i / 18];
            assert!((q - q.round()).abs() < 1e-4, "{v} / {}", s[i / 18]);
        }
        // Baking twice changes nothing.
        assert_eq!(h.run_pass(&mut ParameterBaking).changed, 0);
    }
}
