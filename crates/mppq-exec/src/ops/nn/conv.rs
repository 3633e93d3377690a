//! Conv (1-d, 2-d, 3-d): auto_pad, asymmetric pads, strides, dilations, group, optional bias,
//! on Burn's convolution kernels.

use crate::cpu::conv::{self as cpu_conv, Conv2dGeometry, PackedWeights};
use crate::cpu::integer_conv::{self, PackedCodeWeights};
use crate::error::Result;
use crate::kernel::{IntegerCodes, Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{Window, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::ModuleOps;
use burn::tensor::ops::ConvOptions;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Conv", 1, build);
}

struct Conv {
    window: Window,
    group: usize,
    /// The CPU path's packed weights, reused while the weight buffer stays the same.
    packed: PackedWeights,
    /// The same for the integer path (the simulation's weight codes).
    packed_codes: PackedCodeWeights,
}

/// Parses Conv-style `group` and window attributes.
pub fn parse_conv(node: &OpNode<'_>) -> Result<(Window, usize)> {
    let group = node.int("group", 1)?;
    if group < 1 {
        return Err(node.err(format!("group must be positive, got {group}")));
    }
    Ok((Window::parse(node)?, group as usize))
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let (window, group) = parse_conv(node)?;
    Ok(Box::new(Conv { window, group, packed: PackedWeights::default(), packed_codes: PackedCodeWeights::default() }))
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

impl Kernel for Conv {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let w = float_tensor(ctx, ins.tensor(1)?, "W")?;
        let b = ins.opt_tensor(2)?;
        let codes = ctx.integer_codes.map(|codes| (codes, &self.packed_codes));
        Ok(vec![Some(conv_with(ctx, &self.window, self.group, x, w, b, Some(&self.packed), codes)?.into())])
    }
}

/// Checks and runs a float convolution (shared with the integer / quantized convolutions).
pub fn conv_forward(
    ctx: &KernelContext<'_>,
    window: &Window,
    group: usize,
    x: Tensor,
    w: Tensor,
    b: Option<Tensor>,
) -> Result<Tensor> {
    conv_with(ctx, window, group, x, w, b, None, None)
}

/// [`conv_forward`], reusing packed CPU weights from `packed` when given; with `codes` (the
/// operands are integer codes) on the CPU's integer path where it has one.
#[allow(clippy::too_many_arguments)]
fn conv_with(
    ctx: &KernelContext<'_>,
    window: &Window,
    group: usize,
    x: Tensor,
    w: Tensor,
    b: Option<Tensor>,
    packed: Option<&PackedWeights>,
    codes: Option<(IntegerCodes, &PackedCodeWeights)>,
) -> Result<Tensor> {
    let (xs, ws) = (x.shape(), w.shape());
    if xs.len() < 3 || xs.len() > 5 || ws.len() != xs.len() {
        return Err(shape_err(
            ctx,
            xs,
            ws,
            "must be [N,C,spatial..] and [M,C/group,kernel..] with 1 to 3 spatial dims",
        ));
    }
    if x.dtype() != w.dtype() {
        return Err(ctx.err("X and W have different types"));
    }
    if xs.contains(&0) || ws.contains(&0) {
        return Err(shape_err(ctx, xs, ws, "empty operands are not supported"));
    }
    let g = group;
    if ws[0] % g != 0 || ws[1] * g != xs[1] {
        return Err(shape_err(ctx, xs, ws, format!("channels do not match with group {g}")));
    }
    let spatial = &xs[2..];
    let r = window.resolve(ctx, spatial, Some(&ws[2..]))?;
    if r.kernel[..] != ws[2..] {
        return Err(shape_err(ctx, r.kernel.clone(), ws[2..].to_vec(), "kernel_shape differs from the weight"));
    }
    let out = r.output(ctx, spatial, false)?;
    // The output may be many times the input (more channels): checked before allocating.
    let out_shape: Vec<usize> = [xs[0], ws[0]].into_iter().chain(out.iter().copied()).collect();
    crate::ops::util::layer::check_output_size(ctx, &out_shape)?;
    let bias = match b {
        None => None,
        Some(b) => {
            let b = float_tensor(ctx, b, "B")?;
            if b.shape() != [ws[0]] || b.dtype() != x.dtype() {
                return Err(shape_err(ctx, b.shape(), vec![ws[0]], "bias must be [M] of the input type"));
            }
            Some(b)
        }
    };
    if xs.len() == 4 {
        let geometry = Conv2dGeometry {
            input: arr(&xs),
            weight: arr(&ws),
            group: g,
            strides: arr(&r.strides),
            dilations: arr(&r.dilations),
            pads: pairs(&r.pads),
            output: arr(&out),
        };
        if let Some((codes, cache)) = codes
            && let Some(y) =
                integer_conv::try_conv2d_codes(Some(cache), &x, &w, bias.as_ref(), &geometry, codes.input_offset)
        {
            return Ok(y);
        }
        if let Some(y) = cpu_conv::try_conv2d(packed, &x, &w, bias.as_ref(), &geometry) {
            return Ok(y);
        }
    }
    let bias = bias.map(Tensor::into_dispatch);
    let (xd, wd) = (x.into_dispatch(), w.into_dispatch());
    let out = match xs.len() {
        3 => {
            // 1-d as 2-d with a unit height.
            let x4 = reshape(xd, &[xs[0], xs[1], 1, xs[2]]);
            let w4 = reshape(wd, &[ws[0], ws[1], 1, ws[2]]);
            let o = ConvOptions::new_with_padding([1, r.strides[0]], [(0, 0), r.pads[0]], [1, r.dilations[0]], g);
            let y = Dispatch::conv2d(x4, w4, bias, o);
            let s = burn::backend::TensorMetadata::shape(&y).to_vec();
            reshape(y, &[s[0], s[1], s[3]])
        }
        4 => Dispatch::conv2d(
            xd,
            wd,
            bias,
            ConvOptions::new_with_padding(arr(&r.strides), pairs(&r.pads), arr(&r.dilations), g),
        ),
        _ => Dispatch::conv3d(
            xd,
            wd,
            bias,
            ConvOptions::new_with_padding(arr(&r.strides), pairs(&r.pads), arr(&r.dilations), g),
        ),
    };
    Ok(Tensor::from_dispatch(out))
}
