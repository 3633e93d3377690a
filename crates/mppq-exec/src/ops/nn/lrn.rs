//! LRN (local response normalisation across channels): `x / (bias + alpha / size *
//! sum_{window} x^2)^beta`, the channel window sum computed as a ones-kernel convolution.

use super::avg_pool::window_sum;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("LRN", 1, build);
}

struct Lrn {
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let size = node.int("size", 0)?;
    if size < 1 {
        return Err(node.err(format!("size must be positive, got {size}")));
    }
    Ok(Box::new(Lrn {
        size: size as usize,
        alpha: f64::from(node.float("alpha", 1e-4)?),
        beta: f64::from(node.float("beta", 0.75)?),
        bias: f64::from(node.float("bias", 1.0)?),
    }))
}

impl Kernel for Lrn {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "X")?;
        let xs = x.shape();
        if xs.len() < 3 || x.numel() == 0 {
            return Err(shape_err(ctx, xs, vec![], "input must be a non-empty [N,C,D1..]"));
        }
        let (n, c) = (xs[0], xs[1]);
        let rest: usize = xs[2..].iter().product();
        let xd = x.into_dispatch();
        let sq = reshape(Dispatch::float_mul(xd.clone(), xd.clone()), &[n, 1, c, rest]);
        let before = (self.size - 1) / 2;
        let after = self.size - 1 - before;
        let sum = reshape(window_sum(sq, &[self.size, 1], &[1, 1], &[(before, after), (0, 0)], &[1, 1]), &xs);
        let scaled = Dispatch::float_add_scalar(
            Dispatch::float_mul_scalar(sum, (self.alpha / self.size as f64).into()),
            self.bias.into(),
        );
        let y = Dispatch::float_div(xd, Dispatch::float_powf_scalar(scaled, self.beta.into()));
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
