//! AveragePool and LpPool (1-d, 2-d, 3-d; pads, auto_pad, strides, dilations, ceil_mode,
//! count_include_pad): window sums computed as a single-channel convolution with a ones
//! kernel over [N*C, 1, spatial..], divided by the window count (AveragePool) or raised to
//! 1/p (LpPool).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, Window, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, ModuleOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::Shape;
use burn::tensor::ops::ConvOptions;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("AveragePool", 1, build);
    r.register_fn("LpPool", 1, build);
}

#[derive(Clone, Copy)]
enum Mode {
    Average { count_include_pad: bool },
    Lp(f32),
}

struct Pool {
    window: Window,
    ceil: bool,
    mode: Mode,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let mode = if node.op.op_type == "LpPool" {
        let p = if layer::opset(node) < 2 { node.float("p", 2.0)? } else { node.int("p", 2)? as f32 };
        if p <= 0.0 {
            return Err(node.err(format!("p must be positive, got {p}")));
        }
        Mode::Lp(p)
    } else {
        Mode::Average { count_include_pad: node.int("count_include_pad", 0)? != 0 }
    };
    Ok(Box::new(Pool { window: Window::parse(node)?, ceil: node.int("ceil_mode", 0)? != 0, mode }))
}

fn arr<const N: usize>(v: &[usize]) -> [usize; N] {
    let mut a = [0; N];
    a.copy_from_slice(&v[..N]);
    a
}

fn pairs<const N: usize>(v: &[(usize, usize)]) -> [(usize, usize); N] {
    let mut a = [(0, 0); N];
    a.copy_from_slice(&v[..N]);
    a
}

/// Window sums of `x` [B, 1, spatial..] (1 to 3 spatial dims) with a ones kernel.
pub fn window_sum(
    x: DispatchTensor,
    kernel: &[usize],
    strides: &[usize],
    pads: &[(usize, usize)],
    dilations: &[usize],
) -> DispatchTensor {
    let mut kshape = vec![1, 1];
    kshape.extend_from_slice(kernel);
    let ones = Dispatch::float_ones(Shape::from(kshape), &x.device(), x.dtype().into());
    match kernel.len() {
        1 => {
            let s = x.shape().to_vec();
            let x4 = reshape(x, &[s[0], 1, 1, s[2]]);
            let w4 = reshape(ones, &[1, 1, 1, kernel[0]]);
            let o = ConvOptions::new_with_padding([1, strides[0]], [(0, 0), pads[0]], [1, dilations[0]], 1);
            let y = Dispatch::conv2d(x4, w4, None, o);
            let s = y.shape().to_vec();
            reshape(y, &[s[0], 1, s[3]])
        }
        2 => {
            Dispatch::conv2d(x, ones, None, ConvOptions::new_with_padding(arr(strides), pairs(pads), arr(dilations), 1))
        }
        _ => {
            Dispatch::conv3d(x, ones, None, ConvOptions::new_with_padding(arr(strides), pairs(pads), arr(dilations), 1))
        }
    }
}

impl Kernel for Pool {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "X")?;
        let xs = x.shape();
        if xs.len() < 3 || xs.len() > 5 {
            return Err(shape_err(ctx, xs, vec![], "input must be [N,C,spatial..] with 1 to 3 spatial dims"));
        }
        let spatial = xs[2..].to_vec();
        let r = self.window.resolve(ctx, &spatial, None)?;
        let out = r.output(ctx, &spatial, self.ceil)?;
        // End padding added so that ceil-mode windows fit; such cells are never counted.
        let mut pads = r.pads.clone();
        let mut extra = vec![0; spatial.len()];
        for i in 0..spatial.len() {
            let need = (out[i] - 1) * r.strides[i] + (r.kernel[i] - 1) * r.dilations[i] + 1;
            let have = spatial[i] + pads[i].0 + pads[i].1;
            extra[i] = need.saturating_sub(have);
            pads[i].1 += extra[i];
        }
        let planes = xs[0] * xs[1];
        let mut flat = vec![planes, 1];
        flat.extend_from_slice(&spatial);
        let xd = reshape(x.into_dispatch(), &flat);
        let (dev, dtype) = (xd.device(), xd.dtype());
        let y = match self.mode {
            Mode::Average { count_include_pad } => {
                let sum = window_sum(xd, &r.kernel, &r.strides, &pads, &r.dilations);
                let count = if count_include_pad {
                    let mut padded = vec![1, 1];
                    padded.extend((0..spatial.len()).map(|i| spatial[i] + r.pads[i].0 + r.pads[i].1));
                    let ones = Dispatch::float_ones(Shape::from(padded), &dev, dtype.into());
                    let p: Vec<(usize, usize)> = extra.iter().map(|&e| (0, e)).collect();
                    window_sum(ones, &r.kernel, &r.strides, &p, &r.dilations)
                } else {
                    let mut one = vec![1, 1];
                    one.extend_from_slice(&spatial);
                    let ones = Dispatch::float_ones(Shape::from(one), &dev, dtype.into());
                    window_sum(ones, &r.kernel, &r.strides, &pads, &r.dilations)
                };
                // A window entirely in padding has count 0: ONNX gives NaN there too (0/0).
                Dispatch::float_div(sum, count)
            }
            Mode::Lp(p) => {
                let powed = Dispatch::float_powf_scalar(Dispatch::float_abs(xd), p.into());
                let sum = window_sum(powed, &r.kernel, &r.strides, &pads, &r.dilations);
                Dispatch::float_powf_scalar(sum, (1.0 / p).into())
            }
        };
        let mut shape = vec![xs[0], xs[1]];
        shape.extend_from_slice(&out);
        Ok(vec![Some(Tensor::from_dispatch(reshape(y, &shape)).into())])
    }
}
