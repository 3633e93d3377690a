//! `parameter_quantize`: calibrates the configs of parameters (weights) from their values,
//! with each config's own observer (usually `minmax`, per channel).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_quant::ObserverOptions;
use mppq_quant::calibrate::quantize_parameters;

#[derive(Default)]
pub struct ParameterQuantize {
    pub options: ObserverOptions,
}

impl Pass for ParameterQuantize {
    fn name(&self) -> &'static str {
        "parameter_quantize"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let n = quantize_parameters(ctx.graph, &self.options).in_pass(self.name())?;
        Ok(PassReport::new(self.name(), n, format!("{n} parameter configs calibrated")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_ir::quant::QuantizationState;
    use mppq_ir::quant::location::input;
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    #[test]
    fn weights_get_per_channel_absmax_scales() {
        let mut h = Harness::new(conv_relu_conv());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let report = h.run_pass(&mut ParameterQuantize::default());
        assert_eq!(report.changed, 2, "two Conv weights");
        let conv1 = h.op("conv1");
        let w = h
            .graph
            .variable(h.graph.var_named("conv1.w").unwrap())
            .unwrap()
            .value
            .clone()
            .unwrap()
            .to_f32_vec()
            .unwrap();
        let c = h.config(input(conv1, 1));
        assert_eq!(c.state, QuantizationState::Activated);
        assert_eq!(c.scale.len(), 3);
        for (ch, s) in c.scale.iter().enumerate() {
            let absmax = w[ch * 18..(ch + 1) * 18].iter().fold(0f32, |m, v| m.max(v.abs()));
            let expected = absmax / c.quant_max as f32;
            assert!((s - expected).abs() <= 1e-7, "channel {ch}: {s} vs {expected}");
        }
        // Activations are left to runtime calibration.
        assert_eq!(h.config(input(conv1, 0)).state, QuantizationState::Initial);
    }
}
