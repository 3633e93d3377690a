//! `fold_constants`: Constant nodes become initializers (wraps
//! [`mppq_ir::morph::fold_constants`]), first in the pipeline, so weights stored in Constant nodes
//! are weights for BatchNormalization folding, dispatch and the quantizers alike.

use crate::error::{InPass, Result};
use crate::pass::{Pass, PassContext, PassReport};

pub struct FoldConstants;

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold_constants"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let folded = mppq_ir::morph::fold_constants(ctx.graph).in_pass(self.name())?;
        Ok(PassReport::new(self.name(), folded, format!("{folded} Constant nodes made initializers")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::input;
    use crate::test_graphs::{Harness, conv_relu_conv};
    use mppq_ir::{Attribute, Operation};
    use mppq_quant::quantizer::OnnxRuntimeQuantizer;

    /// conv_relu_conv with conv2's weight moved into a Constant node, as PaddlePaddle exports it.
    fn weight_in_a_constant() -> mppq_ir::Graph {
        let mut g = conv_relu_conv();
        let w = g.var_id("conv2.w").unwrap();
        let value = g.variable_mut(w).unwrap().value.take().unwrap();
        g.add_operation(
            Operation::new("Constant", "conv2.w_const").with_attr("value", Attribute::Tensor(value)),
            &[],
            &[Some(w)],
        )
        .unwrap();
        g
    }

    #[test]
    fn a_weight_in_a_constant_node_is_quantized_as_a_weight() {
        // Without folding, the weight is read at run time: an activation config, per tensor.
        let mut h = Harness::new(weight_in_a_constant());
        h.quantize(&OnnxRuntimeQuantizer::default());
        let conv2 = h.op("conv2");
        assert_eq!(h.config(input(conv2, 1)).channel_axis, None);
        // Folded first, it is a weight: per output channel, symmetric.
        let mut h = Harness::new(weight_in_a_constant());
        assert_eq!(h.run_pass(&mut FoldConstants).changed, 1);
        h.quantize(&OnnxRuntimeQuantizer::default());
        let conv2 = h.op("conv2");
        let w = h.config(input(conv2, 1));
        assert_eq!((w.channel_axis, w.offset.is_empty() || w.offset.iter().all(|o| *o == 0.0)), (Some(0), true));
        // The float function is unchanged.
        let x = h.input("x", &[1, 2, 4, 4], 1.0);
        assert_eq!(h.run_fp32(&x), Harness::new(conv_relu_conv()).run_fp32(&x));
    }
}
