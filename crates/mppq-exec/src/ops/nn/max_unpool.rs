//! MaxUnpool: scatters pooled values back to the positions given by MaxPool's flat Indices
//! into a zero tensor of the unpooled shape (from kernel/strides/pads), zero-extended at the end
//! to the output_shape input when given (as the ONNX reference does).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{Window, check_output_size, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::Shape;
use burn::tensor::ops::IndexingUpdateOp;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MaxUnpool", 9, build);
}

struct MaxUnpool {
    window: Window,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let window = Window::parse(node)?;
    if window.kernel.is_none() {
        return Err(node.err("kernel_shape is required"));
    }
    Ok(Box::new(MaxUnpool { window }))
}

impl Kernel for MaxUnpool {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let i = ins.tensor(1)?;
        let output_shape = ins.ints(2)?;
        let xs = x.shape();
        if xs.len() < 3 || i.shape() != xs || i.kind() != Kind::Int {
            return Err(shape_err(ctx, xs, i.shape(), "X must be [N,C,spatial..] and I int64 of the same shape"));
        }
        let spatial = &xs[2..];
        let r = self.window.resolve(ctx, spatial, None)?;
        // Indices address the inferred shape; output_shape only zero-extends it at the end.
        let mut out: Vec<usize> = vec![xs[0], xs[1]];
        for (d, &size) in spatial.iter().enumerate() {
            let full = (size.max(1) - 1) * r.strides[d] + r.kernel[d];
            let Some(o) = full.checked_sub(r.pads[d].0 + r.pads[d].1) else {
                return Err(shape_err(ctx, xs.clone(), r.kernel.clone(), "pads exceed the unpooled size"));
            };
            out.push(o);
        }
        let target: Vec<usize> = match output_shape {
            Some(s) => {
                if s.len() != xs.len() || s.iter().zip(&out).any(|(&t, &o)| t < 0 || (t as usize) < o) {
                    return Err(ctx.err(format!("output_shape {s:?} is smaller than the unpooled shape {out:?}")));
                }
                s.into_iter().map(|d| d as usize).collect()
            }
            None => out.clone(),
        };
        check_output_size(ctx, &target)?;
        check_output_size(ctx, &out)?;
        let total: usize = out.iter().product();
        let idx = i.to_i64_vec();
        if idx.iter().any(|&v| v < 0 || v as usize >= total) {
            return Err(ctx.err("indices fall outside the output"));
        }
        let n = x.numel();
        let idx = Tensor::from_i64(&[n], idx, ctx.device).into_dispatch();
        let xd = reshape(x.into_dispatch(), &[n]);
        let zeros = Dispatch::float_zeros(Shape::from(vec![total]), &xd.device(), xd.dtype().into());
        let y = Dispatch::float_scatter(0, zeros, idx, xd, IndexingUpdateOp::Assign);
        let mut y = reshape(y, &out);
        for (axis, (&t, &o)) in target.iter().zip(&out).enumerate() {
            if t > o {
                let mut zs = y.shape().to_vec();
                zs[axis] = t - o;
                let z = Dispatch::float_zeros(Shape::from(zs), &y.device(), y.dtype().into());
                y = Dispatch::float_cat(vec![y, z], axis);
            }
        }
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
