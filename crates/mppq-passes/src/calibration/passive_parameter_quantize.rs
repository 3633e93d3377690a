//! `passive_parameter_quantize`: derives the parameters nobody calibrates. Biases of
//! Conv/ConvTranspose/Gemm get `s_in · s_w[c]` (int32, symmetric) from the *effective* input
//! scale, i.e. after dominance (run it after alignment); slots the operator-role table marks as
//! float parameters or shapes (Clip's min/max, Pad's pads and constant value) stay float (`Fp32`),
//! since runtimes read them unquantized.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::op_roles;
use mppq_ir::quant::location::input;
use mppq_ir::quant::{QuantizationState, config_at_mut};
use mppq_quant::calibrate::derive_biases;

pub struct PassiveParameterQuantize;

impl Pass for PassiveParameterQuantize {
    fn name(&self) -> &'static str {
        "passive_parameter_quantize"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let biases = derive_biases(ctx.graph).in_pass(self.name())?;
        let mut float = 0;
        // Slots the role table marks as float parameters or shapes (Clip's bounds, Pad's pads and
        // constant value) are read unquantized by runtimes.
        let unquantized: Vec<_> = ctx
            .graph
            .operations()
            .filter(|(_, o)| o.quant_config.is_some())
            .flat_map(|(id, o)| {
                let roles = op_roles(o);
                (0..o.inputs().len()).filter(move |s| !roles.input(*s).is_quantizable()).map(move |s| input(id, s))
            })
            .collect();
        for loc in unquantized {
            if let Some(c) = config_at_mut(ctx.graph, loc).filter(|c| c.state != QuantizationState::Fp32) {
                c.state = QuantizationState::Fp32;
                c.dominated_by = None;
                float += 1;
            }
        }
        Ok(PassReport::new(
            self.name(),
            biases + float,
            format!("{biases} biases derived, {float} parameters (Clip/Pad bounds, …) kept in float"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::parameter_quantize::ParameterQuantize;
    use crate::calibration::runtime_calibration::RuntimeCalibration;
    use crate::structural::redundant_quant_simplify::RedundantQuantSimplify;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_ir::quant::config_at;
    use mppq_ir::quant::location::output;
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    #[test]
    fn clip_bounds_stay_float() {
        let mut h = Harness::new(crate::test_graphs::add_branches_clip());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let clip = h.op("clip");
        // A quantizer that configured the bounds too: the pass puts them back in float.
        let template = h.config(input(clip, 0)).clone();
        let cfg = h.graph.operation_mut(clip).unwrap().quant_config.as_mut().unwrap();
        cfg.input_configs[1] = Some(template.clone());
        cfg.input_configs[2] = Some(template);
        let report = h.run_pass(&mut PassiveParameterQuantize);
        assert_eq!(report.changed, 2);
        for slot in [1, 2] {
            assert_eq!(h.config(input(clip, slot)).state, QuantizationState::Fp32);
        }
        assert_eq!(h.config(input(clip, 0)).state, QuantizationState::Initial);
    }

    #[test]
    fn bias_scale_is_effective_input_scale_times_weight_scale() {
        let mut h = Harness::new(conv_relu_conv());
        h.calibration("x", &[1, 2, 4, 4], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.run_pass(&mut RedundantQuantSimplify);
        h.run_pass(&mut ParameterQuantize::default());
        h.run_pass(&mut RuntimeCalibration::default());
        // Make the dominator differ from the stale copy: the bias must follow the dominator.
        let relu = h.op("relu");
        config_at_mut(&mut h.graph, output(relu, 0)).unwrap().scale = vec![0.125];
        let report = h.run_pass(&mut PassiveParameterQuantize);
        assert_eq!(report.changed, 2);
        let conv2 = h.op("conv2");
        let w = config_at(&h.graph, input(conv2, 1)).unwrap().scale.clone();
        let b = h.config(input(conv2, 2));
        assert_eq!(b.state, QuantizationState::Passive);
        let want: Vec<f32> = w.iter().map(|s| 0.125 * s).collect();
        assert_eq!(b.scale, want);
        assert_eq!(b.offset, vec![0.0; 3]);
    }
}
