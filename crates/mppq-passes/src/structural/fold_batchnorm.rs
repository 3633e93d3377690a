//! `fold_batchnorm`: folds inference BatchNormalization, and Mul/Add by per-channel constants,
//! into the preceding Conv / ConvTranspose / Gemm (wraps [`mppq_ir::morph::fold_batchnorm`] and
//! [`mppq_ir::morph::channel_affine_to_batchnorm`]). Best run before dispatch;
//! when run after the quantizer, a bias input the fold adds gets no config (stays float).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};

pub struct FoldBatchNorm;

/// Folds every BatchNormalization, and every Mul/Add by per-channel constants after a conv
/// (BatchNormalizations in disguise: PaddlePaddle's conv biases), into the computing op before
/// it, until none is left: (folded, how many of them were Mul/Add). Also what a quantization
/// JSON is applied after, so its names match.
pub fn fold_all(graph: &mut mppq_ir::Graph) -> mppq_ir::Result<(usize, usize)> {
    let (mut folded, mut affine) = (mppq_ir::morph::fold_batchnorm(graph)?, 0);
    loop {
        let rewritten = mppq_ir::morph::channel_affine_to_batchnorm(graph)?;
        if rewritten == 0 {
            return Ok((folded, affine));
        }
        affine += rewritten;
        folded += mppq_ir::morph::fold_batchnorm(graph)?;
    }
}

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        "fold_batchnorm"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let (folded, affine) = fold_all(ctx.graph).in_pass(self.name())?;
        // A fold may add a bias input to an already configured op: keep one config per slot.
        let ids: Vec<_> = ctx.graph.operations().map(|(id, _)| id).collect();
        for id in ids {
            let op = ctx.graph.operation_mut(id).in_pass(self.name())?;
            let inputs = op.inputs().len();
            if let Some(cfg) = op.quant_config.as_mut() {
                cfg.input_configs.resize(inputs.max(cfg.input_configs.len()), None);
            }
        }
        Ok(PassReport::new(
            self.name(),
            folded,
            format!("{folded} BatchNormalization folded ({affine} of them Mul/Add by per-channel constants)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::{Harness, conv_bn_relu};

    #[test]
    fn folding_keeps_the_output_and_removes_bn() {
        let mut h = Harness::new(conv_bn_relu());
        let x = h.input("x", &[1, 2, 4, 4], 0.3);
        let before = h.run_fp32(&x);
        let report = h.run_pass(&mut FoldBatchNorm);
        assert_eq!(report.changed, 1);
        assert!(h.graph.operations().all(|(_, o)| o.op_type != "BatchNormalization"));
        let after = h.run_fp32(&x);
        let max_diff = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(max_diff < 1e-5, "{max_diff}");
    }
}
