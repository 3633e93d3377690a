//! ConstantOfShape: a tensor of a given shape filled with the one value of the `value`
//! attribute (float32 zero by default), as a broadcast view.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{dims, filled, int_input, numel, one};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ConstantOfShape", 9, build);
}

struct ConstantOfShape(Tensor);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let value = match node.op.attr("value") {
        Some(a) => {
            let data = a.as_tensor("value").map_err(|e| node.err(e.to_string()))?;
            if data.len() != 1 {
                return Err(node.err(format!("`value` must have one element, not {}", data.len())));
            }
            Tensor::from_data(data, node.device).map_err(|e| node.err(e.to_string()))?
        }
        None => Tensor::from_f32(&[1], vec![0.0], node.device),
    };
    Ok(Box::new(ConstantOfShape(value)))
}

impl Kernel for ConstantOfShape {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let s = ctx.inputs(inputs).tensor(0)?;
        let shape = dims(ctx, &int_input(ctx, &s, "shape")?, "shape")?;
        numel(ctx, &shape)?;
        one(filled(&self.0, &shape, ctx.device)?)
    }
}
