//! Dropout in inference (output = input; the optional mask output is all true, or all ones
//! before opset 10 when the mask had the input's type). Dropout in training mode is refused: it
//! is random.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Dropout", 1, build_dropout);
}

struct Dropout {
    /// Whether the node asks for the mask output.
    mask: bool,
    /// The mask has the input's type (opset < 10) instead of bool.
    mask_like_input: bool,
    /// Opset 12+: `training_mode` is input 2.
    training_input: bool,
}

fn build_dropout(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    // Opset < 7 has `is_test` (default 0 = training); like every runtime in inference, and as
    // the backend tests expect, the node is the identity either way.
    let outputs = node.op.outputs();
    Ok(Box::new(Dropout {
        mask: outputs.get(1).is_some_and(Option::is_some),
        mask_like_input: node.opset < 10,
        training_input: node.opset >= 12,
    }))
}

impl Kernel for Dropout {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        if self.training_input {
            let ratio = ins.opt_tensor(1)?.map(|t| t.to_f64_vec().first().copied().unwrap_or(0.0)).unwrap_or(0.5);
            let training = ins.opt_tensor(2)?.is_some_and(|t| t.to_i64_vec().first().copied().unwrap_or(0) != 0);
            if training && ratio != 0.0 {
                return Err(ctx.not_implemented("training mode (random dropout)"));
            }
        }
        let mut out = vec![Some(Value::Tensor(x.clone()))];
        if self.mask {
            let ones = Tensor::from_bool(&x.shape(), vec![true; x.numel()], ctx.device);
            let mask =
                if self.mask_like_input { ones.cast(x.dtype()).map_err(|e| ctx.err(e.to_string()))? } else { ones };
            out.push(Some(mask.into()));
        }
        Ok(out)
    }
}
