//! `quant_fusion`: an op whose output feeds only a fusable activation (a fusion host of the
//! operator-role table: Conv, ConvTranspose, Gemm, MatMul, Add) runs as one
//! kernel on the target (Conv+Relu, Gemm+Clip), so the intermediate tensor is never
//! quantized. The computing op's output config and the activation's input config become
//! `Overlapped`, dominated by the activation's output config.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_ir::quant::location::{input, output};
use mppq_ir::quant::{QuantizationState, config_at, config_at_mut};
use mppq_ir::{OpClass, op_roles};

/// The linear activation `op` was fused with by this pass (its output's only reader, whose input
/// config is `Overlapped`), and that activation's output: the simulation computes the pair as one
/// kernel and quantizes only the activation's result.
pub fn fused_activation(graph: &mppq_ir::Graph, op: mppq_ir::OpId) -> Option<(mppq_ir::OpId, mppq_ir::VarId)> {
    let out = graph.operation(op).ok()?.outputs().first().copied().flatten()?;
    let [reader] = graph.consumers(out) else { return None };
    let act = graph.operation(*reader).ok()?;
    let overlapped = act.quant_config.as_ref()?.input_configs.first()?.as_ref()?.state == QuantizationState::Overlapped;
    let is_activation = op_roles(act).is(OpClass::LinearActivation);
    (is_activation && overlapped && !graph.is_graph_output(out))
        .then_some((*reader, act.outputs().first().copied().flatten()?))
}

pub struct QuantFusion {
    /// Activation types the target fuses (ONNX Runtime: Relu and Clip).
    pub activations: Vec<String>,
}

impl Default for QuantFusion {
    fn default() -> Self {
        Self { activations: vec!["Relu".into(), "Clip".into()] }
    }
}

impl Pass for QuantFusion {
    fn name(&self) -> &'static str {
        "quant_fusion"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let graph = &mut *ctx.graph;
        let mut pairs = Vec::new();
        for (id, op) in graph.operations() {
            if !op_roles(op).is(OpClass::FusionHost) || op.quant_config.is_none() {
                continue;
            }
            let Some(Some(out)) = op.outputs().first() else { continue };
            // Another reader (or a graph output) would see the unquantized tensor.
            let [act] = graph.consumers(*out) else { continue };
            if graph.is_graph_output(*out) {
                continue;
            }
            let act_op = graph.operation(*act).in_pass(self.name())?;
            let reads_first = act_op.inputs().first() == Some(&Some(*out));
            if !reads_first || !self.activations.contains(&act_op.op_type) {
                continue;
            }
            let ready = |loc| config_at(graph, loc).is_some_and(|c| c.state == QuantizationState::Initial);
            if ready(output(id, 0)) && ready(input(*act, 0)) && ready(output(*act, 0)) {
                pairs.push((id, *act));
            }
        }
        for (op, act) in &pairs {
            for loc in [output(*op, 0), input(*act, 0)] {
                if let Some(c) = config_at_mut(graph, loc) {
                    c.state = QuantizationState::Overlapped;
                    c.dominated_by = Some(output(*act, 0));
                }
            }
        }
        let n = pairs.len();
        Ok(PassReport::new(self.name(), n, format!("{n} computing op + activation pairs fused")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    #[test]
    fn conv_relu_shares_the_relu_output_config() {
        let mut h = Harness::new(conv_relu_conv());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let report = h.run_pass(&mut QuantFusion::default());
        assert_eq!(report.changed, 1);
        let (conv1, relu, conv2) = (h.op("conv1"), h.op("relu"), h.op("conv2"));
        for loc in [output(conv1, 0), input(relu, 0)] {
            let c = h.config(loc);
            assert_eq!((c.state, c.dominated_by), (QuantizationState::Overlapped, Some(output(relu, 0))));
        }
        // Relu's output and conv2 (output feeds nothing fusable) are untouched.
        assert_eq!(h.config(output(relu, 0)).state, QuantizationState::Initial);
        assert_eq!(h.config(output(conv2, 0)).state, QuantizationState::Initial);
        // Running again finds nothing new.
        assert_eq!(h.run_pass(&mut QuantFusion::default()).changed, 0);
    }

    #[test]
    fn overlapped_configs_are_not_simulated() {
        let mut h = Harness::new(conv_relu_conv());
        h.calibration("x", &[1, 2, 4, 4], 2);
        h.quantize(&OnnxRuntimeQuantizer::default());
        h.pipeline(&crate::PipelineSetting::default());
        let x = h.input("x", &[1, 2, 4, 4], 3.0);
        // Inputs: x, both weights and biases (Relu's and conv2's inputs are overlapped).
        // Outputs: Relu and conv2 (conv1's output is fused into the Relu).
        assert_eq!(h.sim_applied(&x), (5, 2));
        let conv1 = h.op("conv1");
        let relu_out = h.config(output(h.op("relu"), 0)).clone();
        let fused = h.config(output(conv1, 0));
        assert_eq!((fused.scale.clone(), fused.offset.clone()), (relu_out.scale, relu_out.offset));
    }

    #[test]
    fn no_fusion_when_the_target_does_not_fuse_the_activation() {
        let mut h = Harness::new(conv_relu_conv());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let report = h.run_pass(&mut QuantFusion { activations: vec!["Clip".into()] });
        assert_eq!(report.changed, 0);
        assert_eq!(h.config(output(h.op("conv1"), 0)).state, QuantizationState::Initial);
    }
}
