//! DeformConv (2-d): convolution sampling the input at learned offsets (bilinear), with an
//! optional modulation mask, offset groups, weight groups, strides, dilations and pads
//! (asymmetric pads by zero-padding the input first), on Burn's deform_conv2d.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{Window, float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, ModuleOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::Shape;
use burn::tensor::ops::DeformConvOptions;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("DeformConv", 19, build);
}

struct DeformConv {
    window: Window,
    group: usize,
    offset_group: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let group = node.int("group", 1)?;
    let offset_group = node.int("offset_group", 1)?;
    if group < 1 || offset_group < 1 {
        return Err(node.err("group and offset_group must be positive"));
    }
    Ok(Box::new(DeformConv {
        window: Window::parse(node)?,
        group: group as usize,
        offset_group: offset_group as usize,
    }))
}

/// Zero-pads the two spatial axes of [N, C, H, W] by (begin, end) pairs.
fn zero_pad(x: DispatchTensor, pads: &[(usize, usize)]) -> DispatchTensor {
    let mut x = x;
    for (i, &(b, e)) in pads.iter().enumerate() {
        let axis = i + 2;
        for (amount, front) in [(b, true), (e, false)] {
            if amount == 0 {
                continue;
            }
            let mut s = x.shape().to_vec();
            s[axis] = amount;
            let z = Dispatch::float_zeros(Shape::from(s), &x.device(), x.dtype().into());
            x = if front { Dispatch::float_cat(vec![z, x], axis) } else { Dispatch::float_cat(vec![x, z], axis) };
        }
    }
    x
}

impl Kernel for DeformConv {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let w = float_tensor(ctx, ins.tensor(1)?, "W")?;
        let offset = float_tensor(ctx, ins.tensor(2)?, "offset")?;
        let bias = ins.opt_tensor(3)?;
        let mask = ins.opt_tensor(4)?;
        let (xs, ws) = (x.shape(), w.shape());
        if xs.len() != 4 || ws.len() != 4 || xs.contains(&0) || ws.contains(&0) {
            return Err(shape_err(
                ctx,
                xs,
                ws,
                "only non-empty 2-d DeformConv ([N,C,H,W], [M,C/group,kH,kW]) is supported",
            ));
        }
        let (g, og) = (self.group, self.offset_group);
        if ws[1] * g != xs[1] || ws[0] % g != 0 || xs[1] % og != 0 {
            return Err(shape_err(ctx, xs, ws, "channels do not match group / offset_group"));
        }
        let r = self.window.resolve(ctx, &xs[2..], Some(&ws[2..]))?;
        if r.kernel[..] != ws[2..] {
            return Err(shape_err(ctx, r.kernel.clone(), ws[2..].to_vec(), "kernel_shape differs from the weight"));
        }
        let out = r.output(ctx, &xs[2..], false)?;
        let taps = og * ws[2] * ws[3];
        if offset.shape() != [xs[0], 2 * taps, out[0], out[1]] {
            return Err(shape_err(
                ctx,
                offset.shape(),
                vec![xs[0], 2 * taps, out[0], out[1]],
                "offset has the wrong shape",
            ));
        }
        let mask = match mask {
            None => None,
            Some(m) => {
                let m = float_tensor(ctx, m, "mask")?;
                if m.shape() != [xs[0], taps, out[0], out[1]] {
                    return Err(shape_err(
                        ctx,
                        m.shape(),
                        vec![xs[0], taps, out[0], out[1]],
                        "mask has the wrong shape",
                    ));
                }
                Some(m.cast(x.dtype())?.into_dispatch())
            }
        };
        let bias = match bias {
            None => None,
            Some(b) => {
                let b = float_tensor(ctx, b, "B")?;
                if b.shape() != [ws[0]] {
                    return Err(shape_err(ctx, b.shape(), vec![ws[0]], "bias must be [M]"));
                }
                Some(b.cast(x.dtype())?.into_dispatch())
            }
        };
        let symmetric = r.pads.iter().all(|p| p.0 == p.1);
        let (xd, pad) = if symmetric {
            (x.into_dispatch(), [r.pads[0].0, r.pads[1].0])
        } else {
            (zero_pad(x.into_dispatch(), &r.pads), [0, 0])
        };
        let opts = DeformConvOptions::new([r.strides[0], r.strides[1]], pad, [r.dilations[0], r.dilations[1]], g, og);
        let y = Dispatch::deform_conv2d(xd, offset.into_dispatch(), w.into_dispatch(), mask, bias, opts);
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
