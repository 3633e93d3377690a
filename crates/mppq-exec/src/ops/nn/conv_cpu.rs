//! The CPU fast path of 2-d convolution: per image and group, one im2col matrix (built in
//! parallel, straight from NCHW) and one matrix product (`gemm`, multi-threaded), writing NCHW
//! output directly. Burn's flex convolution tiles the output and calls a small product per tile
//! after an NHWC copy; on ResNet-18 that was 96 % of our inference time and 7× ONNX Runtime.
//! Used for float32 4-d convolutions on the CPU; everything else takes Burn's kernels.

use crate::tensor::Tensor;
use burn::backend::{BackendTensor, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind};
use burn::tensor::DType;
use rayon::prelude::*;

/// Whether `t` is a plain float32 tensor of the CPU backend (not recorded for autodiff), whose
/// values the fast path may read and replace.
pub fn eligible(t: &Tensor) -> bool {
    matches!(
        t.dispatch(),
        DispatchTensor { kind: DispatchTensorKind::Flex(BackendTensor::Float(ft)), autodiff: DispatchAutodiffContext::Disabled }
            if ft.dtype() == DType::F32
    )
}

/// A 2-d convolution's geometry (NCHW input `[n, c, h, w]`, weight `[m, c/group, kh, kw]`).
pub struct Conv2dGeometry {
    pub input: [usize; 4],
    pub weight: [usize; 4],
    pub group: usize,
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// (begin, end) padding of height and width.
    pub pads: [(usize, usize); 2],
    pub output: [usize; 2],
}

/// `y = conv(x, w) + b` on row-major buffers; returns `[n, m, oh, ow]`. The caller has checked
/// the shapes (buffer lengths match the geometry).
pub fn conv2d(x: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Conv2dGeometry) -> Vec<f32> {
    let [n, c, h, wd] = g.input;
    let [m, cg, kh, kw] = g.weight;
    let [oh, ow] = g.output;
    let (mg, spatial, k) = (m / g.group, oh * ow, cg * kh * kw);
    let mut y = vec![0f32; n * m * spatial];
    let mut cols = vec![0f32; k * spatial];
    // Threads pay off only on products big enough to hide their start-up (measured: tiny_cnn's
    // 32×32 convolutions ran slower threaded).
    let threaded = mg * spatial * k >= 1 << 22;
    let parallelism = if threaded { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
    for b in 0..n {
        for grp in 0..g.group {
            let x_img = &x[(b * c + grp * cg) * h * wd..][..cg * h * wd];
            im2col(x_img, &mut cols, g, threaded);
            let w_grp = &w[grp * mg * k..][..mg * k];
            let y_grp = &mut y[(b * m + grp * mg) * spatial..][..mg * spatial];
            // SAFETY: `w_grp` is mg×k, `cols` k×spatial and `y_grp` mg×spatial, all row-major
            // and exactly that long (sliced above), so every access of the product is in bounds.
            unsafe {
                gemm::gemm(
                    mg,
                    spatial,
                    k,
                    y_grp.as_mut_ptr(),
                    1,
                    spatial as isize,
                    false,
                    w_grp.as_ptr(),
                    1,
                    k as isize,
                    cols.as_ptr(),
                    1,
                    spatial as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    parallelism,
                );
            }
        }
    }
    if let Some(bias) = bias {
        y.par_chunks_mut(spatial).enumerate().for_each(|(row, out)| {
            let v = bias[row % m];
            out.iter_mut().for_each(|o| *o += v);
        });
    }
    y
}

/// Fills `cols` (`[cg·kh·kw, oh·ow]`) from one image's group of channels; padding reads as 0.
fn im2col(x: &[f32], cols: &mut [f32], g: &Conv2dGeometry, threaded: bool) {
    let [_, _, h, wd] = g.input;
    let [_, _, kh, kw] = g.weight;
    let [oh, ow] = g.output;
    let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
    let (ph, pw) = (g.pads[0].0 as isize, g.pads[1].0 as isize);
    let fill_row = |(row, out): (usize, &mut [f32])| {
        let (ch, ky, kx) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let plane = &x[ch * h * wd..][..h * wd];
        for oy in 0..oh {
            let iy = (oy * sh + ky * dh) as isize - ph;
            let line = &mut out[oy * ow..][..ow];
            if iy < 0 || iy >= h as isize {
                line.fill(0.0);
                continue;
            }
            let src = &plane[iy as usize * wd..][..wd];
            for (ox, o) in line.iter_mut().enumerate() {
                let ix = (ox * sw + kx * dw) as isize - pw;
                *o = if ix >= 0 && (ix as usize) < wd { src[ix as usize] } else { 0.0 };
            }
        }
    };
    if threaded {
        cols.par_chunks_mut(oh * ow).enumerate().for_each(fill_row);
    } else {
        cols.chunks_mut(oh * ow).enumerate().for_each(fill_row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct convolution, the obvious way.
    fn reference(x: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Conv2dGeometry) -> Vec<f32> {
        let [n, c, h, wd] = g.input;
        let [m, cg, kh, kw] = g.weight;
        let [oh, ow] = g.output;
        let mg = m / g.group;
        let mut y = vec![0f32; n * m * oh * ow];
        for b in 0..n {
            for oc in 0..m {
                let grp = oc / mg;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = bias.map_or(0.0, |b| b[oc]);
                        for ic in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * g.strides[0] + ky * g.dilations[0]) as isize - g.pads[0].0 as isize;
                                    let ix = (ox * g.strides[1] + kx * g.dilations[1]) as isize - g.pads[1].0 as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xv = x[((b * c + grp * cg + ic) * h + iy as usize) * wd + ix as usize];
                                    acc += xv * w[((oc * cg + ic) * kh + ky) * kw + kx];
                                }
                            }
                        }
                        y[((b * m + oc) * oh + oy) * ow + ox] = acc;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn matches_a_direct_convolution() {
        // Strides, dilations, asymmetric pads, groups, batch 2, bias.
        let g = Conv2dGeometry {
            input: [2, 4, 7, 6],
            weight: [6, 2, 3, 2],
            group: 2,
            strides: [2, 1],
            dilations: [1, 2],
            pads: [(1, 2), (0, 1)],
            output: [(7 + 3 - 3) / 2 + 1, (6 + 1 - 3) + 1],
        };
        let x: Vec<f32> = (0..2 * 4 * 7 * 6).map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.25).collect();
        let w: Vec<f32> = (0..6 * 2 * 3 * 2).map(|i| ((i * 11 % 7) as f32 - 3.0) * 0.5).collect();
        let b = [0.5, -1.0, 2.0, 0.0, 0.25, -0.75];
        let got = conv2d(&x, &w, Some(&b), &g);
        let want = reference(&x, &w, Some(&b), &g);
        assert_eq!(got.len(), want.len());
        for (i, (a, e)) in got.iter().zip(&want).enumerate() {
            assert!((a - e).abs() <= 1e-4 * e.abs().max(1.0), "{i}: {a} vs {e}");
        }
    }
}
