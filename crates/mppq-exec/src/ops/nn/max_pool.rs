//! MaxPool (1-d, 2-d with optional int64 Indices output in either storage order; 3-d
//! without Indices, as two separable 2-d pools): pads, auto_pad, strides, dilations,
//! ceil_mode (as extra end padding). 8/16-bit integer inputs are pooled exactly in float.

use super::util::{Resolved, Window, reshape, shape_err};
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
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

/// A 2-d pooling window over `planes` planes of `h × w`.
struct Pool2d {
    input: [usize; 3],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    /// Begin padding of height and width (end padding only shows in `output`).
    pads: [usize; 2],
    output: [usize; 2],
}

/// Max pooling of a contiguous CPU float32 input, one plane per task: Burn's flex pool was
/// 5–11 ms of ResNet-18's ~110. Each (kernel row, kernel column) is one pass over an output row
/// reading a contiguous run of input (rows are split into stride phases first), with the
/// in-bounds range computed up front: no padding tests in the loop, no dependency chain across
/// taps, and a plain comparison for the max (`f32::max`'s NaN rules, a data-dependent branch or
/// one output at a time each cost 2–3× here). Windows see only real input (padding never
/// wins), as ONNX defines; planes holding a NaN get NaN in every window that sees one.
fn cpu_pool2d(x: &[f32], g: &Pool2d) -> Vec<f32> {
    use rayon::prelude::*;
    let [planes, h, w] = g.input;
    let [oh, ow] = g.output;
    let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
    // Output positions `o` whose tap `t` lands inside `0..size`: `o·stride + t·dilation - pad`.
    let inside = |t: usize, stride: usize, dilation: usize, pad: usize, size: usize, out: usize| {
        let off = (t * dilation) as isize - pad as isize;
        let lo = ((-off).max(0) as usize).div_ceil(stride).min(out);
        let hi = ((size as isize - off).max(0) as usize).div_ceil(stride).clamp(lo, out);
        (off, lo..hi)
    };
    // Each kernel column reads input column `ox·sw + off`, `off = kx·dw − pad` = `q·sw + r`:
    // element `ox + q` of the row's phase `r` (every `sw`-th value from `r`). With the row split
    // into phases once, every kernel column is one contiguous, vectorisable pass.
    let taps: Vec<(usize, isize, std::ops::Range<usize>)> = (0..g.kernel[1])
        .map(|kx| {
            let (off, oxs) = inside(kx, sw, dw, g.pads[1], w, ow);
            (off.rem_euclid(sw as isize) as usize, off.div_euclid(sw as isize), oxs)
        })
        .collect();
    let phase_len = w.div_ceil(sw);
    let mut y = vec![0f32; planes * oh * ow];
    y.par_chunks_mut(oh * ow).enumerate().for_each(|(p, out)| {
        let plane = &x[p * h * w..][..h * w];
        // Row `iy`'s phases, phase `r` at `[(iy·sw + r)·phase_len ..]`.
        let mut phases = vec![f32::NEG_INFINITY; h * sw * phase_len];
        for (row, dst) in plane.chunks_exact(w).zip(phases.chunks_exact_mut(sw * phase_len)) {
            for (r, phase) in dst.chunks_exact_mut(phase_len).enumerate() {
                for (d, v) in phase.iter_mut().zip(row[r.min(w)..].iter().step_by(sw)) {
                    *d = *v;
                }
            }
        }
        out.fill(f32::NEG_INFINITY);
        for ky in 0..g.kernel[0] {
            let (yoff, oys) = inside(ky, sh, dh, g.pads[0], h, oh);
            for oy in oys {
                let iy = (oy as isize * sh as isize + yoff) as usize;
                let line = &mut out[oy * ow..][..ow];
                for (r, q, oxs) in &taps {
                    if oxs.is_empty() {
                        continue;
                    }
                    let src = &phases[(iy * sw + r) * phase_len + (oxs.start as isize + q) as usize..][..oxs.len()];
                    for (o, &v) in line[oxs.clone()].iter_mut().zip(src) {
                        *o = if v > *o { v } else { *o };
                    }
                }
            }
        }
        if plane.iter().any(|v| v.is_nan()) {
            nan_windows(plane, out, g);
        }
    });
    y
}

/// Sets to NaN every output whose window holds a NaN (`f32::max` skips NaN; a comparison-based
/// max, as other runtimes use, propagates it). Only called for planes that hold one.
fn nan_windows(plane: &[f32], out: &mut [f32], g: &Pool2d) {
    let [_, h, w] = g.input;
    let ow = g.output[1];
    for (i, o) in out.iter_mut().enumerate() {
        let (oy, ox) = (i / ow, i % ow);
        let hit = (0..g.kernel[0]).any(|ky| {
            let iy = (oy * g.strides[0] + ky * g.dilations[0]) as isize - g.pads[0] as isize;
            (0..h as isize).contains(&iy)
                && (0..g.kernel[1]).any(|kx| {
                    let ix = (ox * g.strides[1] + kx * g.dilations[1]) as isize - g.pads[1] as isize;
                    (0..w as isize).contains(&ix) && plane[iy as usize * w + ix as usize].is_nan()
                })
        });
        if hit {
            *o = f32::NAN;
        }
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
            if let Some(values) = crate::cpu::f32_values(&x) {
                let y = x.like_f32(&[xs[0], xs[1], out[0], out[1]], cpu_pool2d(values, &geometry));
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
#[cfg(test)]
mod tests {
    use super::{Pool2d, cpu_pool2d};

    /// The obvious max over each window's in-bounds taps, NaN propagating.
    fn reference(x: &[f32], g: &Pool2d) -> Vec<f32> {
        let [planes, h, w] = g.input;
        let [oh, ow] = g.output;
        let mut y = Vec::new();
        for p in 0..planes {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut m = f32::NEG_INFINITY;
                    for ky in 0..g.kernel[0] {
                        for kx in 0..g.kernel[1] {
                            let iy = (oy * g.strides[0] + ky * g.dilations[0]) as isize - g.pads[0] as isize;
                            let ix = (ox * g.strides[1] + kx * g.dilations[1]) as isize - g.pads[1] as isize;
                            if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                                let v = x[p * h * w + iy as usize * w + ix as usize];
                                if v > m || v.is_nan() || m.is_nan() {
                                    m = if m.is_nan() { m } else { v };
                                }
                            }
                        }
                    }
                    y.push(m);
                }
            }
        }
        y
    }

    #[test]
    fn matches_a_direct_max_pool_with_pads_strides_dilations_and_nan() {
        let geometries = [
            Pool2d {
                input: [3, 9, 11],
                kernel: [3, 3],
                strides: [2, 2],
                dilations: [1, 1],
                pads: [1, 1],
                output: [5, 6],
            },
            Pool2d {
                input: [2, 7, 8],
                kernel: [2, 3],
                strides: [1, 3],
                dilations: [2, 1],
                pads: [0, 2],
                output: [5, 3],
            },
            // Padding so wide that some windows see one tap only.
            Pool2d {
                input: [1, 3, 3],
                kernel: [3, 3],
                strides: [1, 1],
                dilations: [1, 1],
                pads: [2, 2],
                output: [3, 3],
            },
        ];
        for g in &geometries {
            let n = g.input.iter().product::<usize>();
            let mut x: Vec<f32> = (0..n).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.5).collect();
            x[n / 2] = f32::NAN;
            let (got, want) = (cpu_pool2d(&x, g), reference(&x, g));
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(a == b || (a.is_nan() && b.is_nan()), "{:?} output {i}: {a} vs {b}", g.input);
            }
        }
    }
}
