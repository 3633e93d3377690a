//! MaxPool (1-d, 2-d with optional int64 Indices output in either storage order; 3-d
//! without Indices, as two separable 2-d pools): pads, auto_pad, strides, dilations,
//! ceil_mode (as extra end padding). 8/16-bit integer inputs are pooled exactly in float.

use crate::cpu::{self, max_pool::Pool2d};
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{Resolved, Window, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::IntTensorOps;
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::module::{max_pool2d, max_pool2d_with_indices};
use burn::tensor::ops::MaxPoolOptions;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MaxPool", 1, build);
}

struct MaxPool {
    window: Window,
    ceil: bool,
    column_major: bool,
    /// Whether the node has its Indices output.
    indices: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(MaxPool {
        window: Window::parse(node)?,
        ceil: node.int("ceil_mode", 0)? != 0,
        column_major: node.int("storage_order", 0)? != 0,
        indices: node.op.outputs().get(1).is_some_and(|o| o.is_some()),
    }))
}

/// 2-d max pool of [B, C, H, W] with (begin, end) pads, optionally with per-plane indices.
fn pool2d(
    x: DispatchTensor,
    k: [usize; 2],
    s: [usize; 2],
    p: [(usize, usize); 2],
    d: [usize; 2],
    indices: bool,
) -> (DispatchTensor, Option<DispatchTensor>) {
    let opts = MaxPoolOptions::new(k).with_stride(s).with_padding_pairs(p).with_dilation(d);
    let x = burn::tensor::Tensor::<4>::from_dispatch(x);
    if indices {
        let (y, i) = max_pool2d_with_indices(x, opts);
        (y.into_dispatch(), Some(i.into_dispatch()))
    } else {
        (max_pool2d(x, opts).into_dispatch(), None)
    }
}

impl Kernel for MaxPool {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let dtype = x.dtype();
        let x = match x.kind() {
            Kind::Float => x,
            Kind::Int if matches!(dtype, DataType::Int8 | DataType::Uint8 | DataType::Int16 | DataType::Uint16) => {
                x.cast(DataType::Float)?
            }
            _ => return Err(ctx.err(format!("{dtype} inputs are not supported"))),
        };
        let xs = x.shape();
        if xs.len() < 3 || xs.len() > 5 {
            return Err(shape_err(ctx, xs, vec![], "input must be [N,C,spatial..] with 1 to 3 spatial dims"));
        }
        let spatial = xs[2..].to_vec();
        let r = self.window.resolve(ctx, &spatial, None)?;
        let out = r.output(ctx, &spatial, self.ceil)?;
        let Resolved { kernel: k, strides: s, dilations: dl, pads } = r;
        let mut pads = pads;
        for i in 0..spatial.len() {
            let need = (out[i] - 1) * s[i] + (k[i] - 1) * dl[i] + 1;
            let have = spatial[i] + pads[i].0 + pads[i].1;
            pads[i].1 += need.saturating_sub(have);
        }
        let want_indices = self.indices;
        if spatial.len() == 2 && !want_indices {
            let geometry = Pool2d {
                input: [xs[0] * xs[1], xs[2], xs[3]],
                kernel: [k[0], k[1]],
                strides: [s[0], s[1]],
                dilations: [dl[0], dl[1]],
                pads: [pads[0].0, pads[1].0],
                output: [out[0], out[1]],
            };
            if let Some(values) = cpu::f32_values(&x) {
                let y = x.like_f32(&[xs[0], xs[1], out[0], out[1]], cpu::max_pool::max_pool2d(values, &geometry));
                return Ok(vec![Some(y.cast(dtype)?.into()), None]);
            }
        }
        let xd = x.into_dispatch();
        let (y, idx, plane) = match spatial.len() {
            1 => {
                let x4 = reshape(xd, &[xs[0], xs[1], 1, xs[2]]);
                let (y, i) = pool2d(x4, [1, k[0]], [1, s[0]], [(0, 0), pads[0]], [1, dl[0]], want_indices);
                (y, i, (1, xs[2]))
            }
            2 => {
                let (y, i) = pool2d(xd, [k[0], k[1]], [s[0], s[1]], [pads[0], pads[1]], [dl[0], dl[1]], want_indices);
                (y, i, (xs[2], xs[3]))
            }
            _ => {
                if want_indices {
                    return Err(ctx.err("the Indices output of a 3-d MaxPool is not supported"));
                }
                let (n, c, dd) = (xs[0], xs[1], xs[2]);
                let x4 = reshape(xd, &[n, c * dd, xs[3], xs[4]]);
                let (y, _) = pool2d(x4, [k[1], k[2]], [s[1], s[2]], [pads[1], pads[2]], [dl[1], dl[2]], false);
                let hw = out[1] * out[2];
                let y = reshape(y, &[n * c, 1, dd, hw]);
                let (y, _) = pool2d(y, [k[0], 1], [s[0], 1], [pads[0], (0, 0)], [dl[0], 1], false);
                (y, None, (0, 0))
            }
        };
        let mut shape = vec![xs[0], xs[1]];
        shape.extend_from_slice(&out);
        let ys = y.shape().to_vec();
        if ys.iter().product::<usize>() != shape.iter().product::<usize>() {
            return Err(shape_err(ctx, ys, shape, "pooling produced an unexpected shape"));
        }
        let y = Tensor::from_dispatch(reshape(y, &shape)).cast(dtype)?;
        let indices = match idx {
            None => None,
            Some(i) => {
                let (h, w) = plane;
                let mut i = Tensor::from_dispatch(i).cast(DataType::Int64)?.into_dispatch();
                if self.column_major {
                    let rows = Dispatch::int_div_scalar(i.clone(), (w as i64).into());
                    let cols = Dispatch::int_remainder_scalar(i, (w as i64).into());
                    i = Dispatch::int_add(Dispatch::int_mul_scalar(cols, (h as i64).into()), rows);
                }
                let planes = xs[0] * xs[1];
                let offsets: Vec<i64> = (0..planes as i64).map(|p| p * (h * w) as i64).collect();
                let off = Tensor::from_i64(&[xs[0], xs[1], 1, 1], offsets, ctx.device).into_dispatch();
                let i = Dispatch::int_add(i, off);
                Some(Tensor::from_dispatch(i).reshape(&shape).into())
            }
        };
        Ok(vec![Some(y.into()), indices])
    }
}
