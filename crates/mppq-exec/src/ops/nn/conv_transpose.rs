//! ConvTranspose (1-d, 2-d, 3-d): strides, dilations, group, output_padding, output_shape,
//! auto_pad and asymmetric pads (Burn computes the unpadded result; pads and output padding
//! are then applied by slicing / zero-extending the output), optional bias.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, AutoPad, Window, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, ModuleOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::Shape;
use burn::tensor::Slice;
use burn::tensor::ops::ConvTransposeOptions;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("ConvTranspose", 1, build);
}

struct ConvTranspose {
    window: Window,
    group: usize,
    output_padding: Option<Vec<usize>>,
    output_shape: Option<Vec<usize>>,
}

fn nonneg(node: &OpNode<'_>, name: &str) -> Result<Option<Vec<usize>>> {
    match node.ints(name)? {
        None => Ok(None),
        Some(v) if v.iter().all(|&x| x >= 0) => Ok(Some(v.into_iter().map(|x| x as usize).collect())),
        Some(v) => Err(node.err(format!("{name} must not be negative, got {v:?}"))),
    }
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let group = node.int("group", 1)?;
    if group < 1 {
        return Err(node.err(format!("group must be positive, got {group}")));
    }
    Ok(Box::new(ConvTranspose {
        window: Window::parse(node)?,
        group: group as usize,
        output_padding: nonneg(node, "output_padding")?,
        output_shape: nonneg(node, "output_shape")?,
    }))
}

fn arr<const N: usize>(v: &[usize]) -> [usize; N] {
    let mut a = [0; N];
    a.copy_from_slice(&v[..N]);
    a
}

impl Kernel for ConvTranspose {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let w = float_tensor(ctx, ins.tensor(1)?, "W")?;
        let b = ins.opt_tensor(2)?;
        let (xs, ws) = (x.shape(), w.shape());
        if xs.len() < 3 || xs.len() > 5 || ws.len() != xs.len() {
            return Err(shape_err(
                ctx,
                xs,
                ws,
                "must be [N,C,spatial..] and [C,M/group,kernel..] with 1 to 3 spatial dims",
            ));
        }
        if x.dtype() != w.dtype() {
            return Err(ctx.err("X and W have different types"));
        }
        if xs.contains(&0) || ws.contains(&0) {
            return Err(shape_err(ctx, xs, ws, "empty operands are not supported"));
        }
        let g = self.group;
        if ws[0] != xs[1] || xs[1] % g != 0 || ws[1] == 0 {
            return Err(shape_err(ctx, xs, ws, format!("channels do not match with group {g}")));
        }
        let m = ws[1].checked_mul(g).ok_or_else(|| ctx.err("group × weight channels overflow"))?;
        let n = xs.len() - 2;
        let spatial = &xs[2..];
        // Kernel, strides, dilations; pads resolved here (not the forward-conv rule).
        let mut plain = self.window.clone();
        plain.auto_pad = AutoPad::NotSet;
        let r = plain.resolve(ctx, spatial, Some(&ws[2..]))?;
        if r.kernel[..] != ws[2..] {
            return Err(shape_err(ctx, r.kernel.clone(), ws[2..].to_vec(), "kernel_shape differs from the weight"));
        }
        let out_pad = match &self.output_padding {
            None => vec![0; n],
            Some(p) if p.len() == n => p.clone(),
            Some(p) => return Err(ctx.err(format!("output_padding has {} entries, expected {n}", p.len()))),
        };
        // Unpadded output size of each spatial axis.
        let full: Vec<usize> = (0..n)
            .map(|i| {
                let span = (r.kernel[i] - 1).checked_mul(r.dilations[i])?;
                r.strides[i].checked_mul(spatial[i] - 1)?.checked_add(span)?.checked_add(1)
            })
            .collect::<Option<_>>()
            .ok_or_else(|| ctx.err("strides, dilations and kernel give an output size past any memory"))?;
        // The unpadded result is computed first: it must fit the budget too.
        let full_shape: Vec<usize> = [xs[0], m].into_iter().chain(full.iter().copied()).collect();
        layer::check_output_size(ctx, &full_shape)?;
        let output_shape = match &self.output_shape {
            Some(s) if s.len() == n + 2 => Some(s[2..].to_vec()),
            Some(s) if s.len() == n => Some(s.clone()),
            Some(s) => return Err(ctx.err(format!("output_shape has {} entries, expected {n}", s.len()))),
            None if matches!(self.window.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) => {
                Some((0..n).map(|i| spatial[i] * r.strides[i]).collect())
            }
            None => None,
        };
        // (begin, output size) per axis in the coordinates of the unpadded result.
        let mut window = Vec::with_capacity(n);
        for i in 0..n {
            match &output_shape {
                Some(os) => {
                    let total = (full[i] + out_pad[i]) as i64 - os[i] as i64;
                    let upper = self.window.auto_pad == AutoPad::SameUpper;
                    let begin = if upper { total / 2 } else { total - total / 2 };
                    window.push((begin.max(0) as usize, os[i]));
                }
                None => {
                    let (pb, pe) = r.pads[i];
                    let size = (full[i] + out_pad[i]).checked_sub(pb + pe).filter(|&s| s > 0);
                    let Some(size) = size else {
                        return Err(shape_err(
                            ctx,
                            spatial.to_vec(),
                            r.pads.iter().map(|p| p.0 + p.1).collect(),
                            "pads leave an empty output",
                        ));
                    };
                    window.push((pb, size));
                }
            }
        }
        let mut out_shape = vec![xs[0], m];
        out_shape.extend(window.iter().map(|w| w.1));
        layer::check_output_size(ctx, &out_shape)?;
        if window.iter().any(|w| w.1 == 0) {
            return Err(shape_err(ctx, xs.clone(), out_shape, "empty output"));
        }
        let bias = match b {
            None => None,
            Some(b) => {
                let b = float_tensor(ctx, b, "B")?;
                if b.shape() != [m] || b.dtype() != x.dtype() {
                    return Err(shape_err(ctx, b.shape(), vec![m], "bias must be [M] of the input type"));
                }
                Some(b.into_dispatch())
            }
        };
        let (xd, wd) = (x.into_dispatch(), w.into_dispatch());
        let zeros = vec![0; n];
        let y = match n {
            1 => {
                let x4 = reshape(xd, &[xs[0], xs[1], 1, xs[2]]);
                let w4 = reshape(wd, &[ws[0], ws[1], 1, ws[2]]);
                let o = ConvTransposeOptions::new([1, r.strides[0]], [0, 0], [0, 0], [1, r.dilations[0]], g);
                let y = Dispatch::conv_transpose2d(x4, w4, None, o);
                let s = y.shape().to_vec();
                reshape(y, &[s[0], s[1], s[3]])
            }
            2 => Dispatch::conv_transpose2d(
                xd,
                wd,
                None,
                ConvTransposeOptions::new(arr(&r.strides), arr(&zeros), arr(&zeros), arr(&r.dilations), g),
            ),
            _ => Dispatch::conv_transpose3d(
                xd,
                wd,
                None,
                ConvTransposeOptions::new(arr(&r.strides), arr(&zeros), arr(&zeros), arr(&r.dilations), g),
            ),
        };
        // Crop / zero-extend each spatial axis to its window.
        let mut y = y;
        for (i, &(begin, size)) in window.iter().enumerate() {
            let axis = i + 2;
            let have = y.shape().to_vec();
            if begin + size > have[axis] {
                let mut zshape = have.clone();
                zshape[axis] = begin + size - have[axis];
                let z = Dispatch::float_zeros(Shape::from(zshape), &y.device(), y.dtype().into());
                y = Dispatch::float_cat(vec![y, z], axis);
            }
            if begin != 0 || size != y.shape().to_vec()[axis] {
                let mut slices: Vec<Slice> = (0..n + 2).map(|_| Slice::new(0, None, 1)).collect();
                slices[axis] = Slice::new(begin as isize, Some((begin + size) as isize), 1);
                y = Dispatch::float_slice(y, &slices);
            }
        }
        if let Some(b) = bias {
            let mut bshape = vec![1; n + 2];
            bshape[1] = m;
            y = Dispatch::float_add(y, reshape(b, &bshape));
        }
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
