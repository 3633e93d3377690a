//! `init_quantization`: the pipeline step where the platform's quantizer gives every operation
//! dispatched to its precision its initial configs (bits, symmetry, granularity, observer per
//! input and output slot). Everything after it refines those configs.

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_quant::quantizer::{Quantizer, init_quantization};
use std::sync::Arc;

pub struct InitQuantization {
    pub quantizer: Arc<dyn Quantizer>,
}

impl Pass for InitQuantization {
    fn name(&self) -> &'static str {
        "init_quantization"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let n = init_quantization(ctx.graph, self.quantizer.as_ref()).in_pass(self.name())?;
        Ok(PassReport::new(self.name(), n, format!("{n} operations configured by `{}`", self.quantizer.name())))
    }
}
