//! `per_tensor_below_opset_13`: every weight (and bias) config made per-tensor, right after the
//! quantizer configured the operations, for a model held below opset 13, where Q/DQ exist per
//! tensor only. The caller adds it at [`crate::StagePasses::after_configs`] and says why.

use crate::runtime::pass::{Pass, PassContext, PassReport};

pub struct PerTensorBelowOpset13 {
    /// Why the model stays below opset 13 (the operations that cannot be converted), for the report.
    pub reason: String,
}

impl Pass for PerTensorBelowOpset13 {
    fn name(&self) -> &'static str {
        "per_tensor_below_opset_13"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> crate::Result<PassReport> {
        let mut changed = 0;
        let ids: Vec<_> = ctx.graph.operations().map(|(id, _)| id).collect();
        for id in ids {
            let Some(qc) = ctx.graph.operation_mut(id).ok().and_then(|op| op.quant_config.as_mut()) else { continue };
            changed += qc.configs_mut().map(|c| usize::from(c.make_per_tensor())).sum::<usize>();
        }
        Ok(PassReport::new(
            self.name(),
            changed,
            format!("{changed} per-channel configs made per-tensor: {}", self.reason),
        ))
    }
}
