//! Depthwise 2-d convolution (each output channel reads one input channel: `c/group = 1`), direct
//! instead of through the matrix product: a depthwise group is a 1-row product whose im2col panel
//! is `kh·kw` times the input, so the GEMM path spent its time packing (MobileNet-style models:
//! PP-OCR, PP-LCNet). Each output row accumulates `kh·kw` shifted input rows times one weight,
//! contiguous for stride 1, which the compiler vectorizes; compiled per instruction set and
//! chosen at run time ([`crate::simd_dispatch!`]), with plain multiply-adds (no FMA) so every CPU gives the same numbers.
//! Planes run in parallel.

use super::conv::Conv2dGeometry;
use rayon::prelude::*;

/// `y = depthwise_conv(x, w) + b` (`[n, m, oh, ow]`); requires `g.weight[1] == 1`.
pub fn conv2d(x: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Conv2dGeometry) -> Vec<f32> {
    let [_, c, h, wd] = g.input;
    let [m, _, kh, kw] = g.weight;
    let [oh, ow] = g.output;
    let (mg, spatial, taps) = (m / g.group, oh * ow, kh * kw);
    let mut y = vec![0f32; g.input[0] * m * spatial];
    let plane = |(index, out): (usize, &mut [f32])| {
        let (b, oc) = (index / m, index % m);
        let input = &x[(b * c + oc / mg) * h * wd..][..h * wd];
        dispatch_plane(input, &w[oc * taps..][..taps], bias.map_or(0.0, |b| b[oc]), g, out);
    };
    // Small images: one thread (a task per plane would cost more than the plane).
    if spatial * taps < 4096 {
        y.chunks_mut(spatial).enumerate().for_each(plane);
    } else {
        y.par_chunks_mut(spatial).enumerate().for_each(plane);
    }
    y
}

/// One output plane from one input plane.
#[inline(always)]
fn plane_body(x: &[f32], w: &[f32], bias: f32, g: &Conv2dGeometry, out: &mut [f32]) {
    let [_, _, h, wd] = g.input;
    let [_, _, kh, kw] = g.weight;
    let ow = g.output[1];
    let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
    let (ph, pw) = (g.pads[0].0 as isize, g.pads[1].0 as isize);
    for (oy, row) in out.chunks_mut(ow).enumerate() {
        for ky in 0..kh {
            let iy = (oy * sh + ky * dh) as isize - ph;
            if iy < 0 || iy >= h as isize {
                continue;
            }
            let src = &x[iy as usize * wd..][..wd];
            for kx in 0..kw {
                let weight = w[ky * kw + kx];
                let ix0 = (kx * dw) as isize - pw;
                // Output columns t with 0 <= ix0 + t·sw < wd read the input; the rest is padding.
                let lo = ((-ix0).max(0) as usize).div_ceil(sw).min(ow);
                let hi = ((wd as isize - ix0).max(0) as usize).div_ceil(sw).clamp(lo, ow);
                if hi == lo {
                    continue;
                }
                let first = (ix0 + (lo * sw) as isize) as usize;
                if sw == 1 {
                    for (o, v) in row[lo..hi].iter_mut().zip(&src[first..first + hi - lo]) {
                        *o += weight * v;
                    }
                } else {
                    for (o, v) in row[lo..hi].iter_mut().zip(src[first..].iter().step_by(sw)) {
                        *o += weight * v;
                    }
                }
            }
        }
        for o in row.iter_mut() {
            *o += bias;
        }
    }
}

crate::simd_dispatch!(
    /// [`plane_body`] compiled for the widest instruction set this CPU has.
    fn dispatch_plane(x: &[f32], w: &[f32], bias: f32, g: &Conv2dGeometry, out: &mut [f32]) => plane_body
);
