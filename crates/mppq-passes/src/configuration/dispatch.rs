//! `dispatch`: the pipeline step that decides each operation's precision with the chosen
//! dispatcher (`allin`, `conservative`, … or a registered one) and writes it onto the graph. The
//! decision, with each op's reason, is left in `PassContext::dispatch` for reports. It runs after
//! the structural passes (a dispatcher must see Conv→Relu, not Conv→BatchNormalization→Relu).

use crate::error::{InPass, Result};
use crate::runtime::pass::{Pass, PassContext, PassReport};
use mppq_dispatch::{DispatchContext, dispatcher_by_name};

pub struct Dispatch {
    /// The dispatcher's registered name.
    pub dispatcher: String,
    /// Target precision, the quantizer's declared types and the ignored scope.
    pub context: DispatchContext,
}

impl Pass for Dispatch {
    fn name(&self) -> &'static str {
        "dispatch"
    }

    fn run(&mut self, ctx: &mut PassContext<'_>) -> Result<PassReport> {
        let dispatcher = dispatcher_by_name(&self.dispatcher).in_pass(self.name())?;
        let dispatch = dispatcher.dispatch(ctx.graph, &self.context).in_pass(self.name())?;
        dispatch.apply(ctx.graph).in_pass(self.name())?;
        let quantized = dispatch.iter().filter(|(_, d)| d.precision.is_quantized()).count();
        let total = dispatch.len();
        ctx.dispatch = Some(dispatch);
        Ok(PassReport::new(
            self.name(),
            quantized,
            format!("`{}`: {quantized} of {total} operations quantized", self.dispatcher),
        ))
    }
}
