//! GlobalAveragePool and GlobalMaxPool: mean / max over all spatial axes, kept as size 1.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("GlobalAveragePool", 1, build);
    r.register_fn("GlobalMaxPool", 1, build);
}

struct GlobalPool {
    max: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(GlobalPool { max: node.op.op_type == "GlobalMaxPool" }))
}

impl Kernel for GlobalPool {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "X")?;
        let xs = x.shape();
        if xs.len() < 2 || x.numel() == 0 {
            return Err(shape_err(ctx, xs, vec![], "input must be [N,C,spatial..] and not empty"));
        }
        let plane: usize = xs[2..].iter().product();
        let flat = reshape(x.into_dispatch(), &[xs[0], xs[1], plane]);
        let y = if self.max { Dispatch::float_max_dim(flat, 2) } else { Dispatch::float_mean_dim(flat, 2) };
        let mut shape = vec![xs[0], xs[1]];
        shape.extend(std::iter::repeat_n(1, xs.len() - 2));
        Ok(vec![Some(Tensor::from_dispatch(reshape(y, &shape)).into())])
    }
}
