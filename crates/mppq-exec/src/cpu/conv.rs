//! The CPU fast path of 2-d float32 convolution: an implicit-GEMM convolution on our own
//! packed matrix product ([`super::sgemm`]). The weights are packed once per weight buffer and
//! kept by the kernel; the im2col columns are packed panel by panel straight from the NCHW input
//! (runs of an output row are copied, not gathered one by one) and never materialised whole;
//! the bias is added when the tile is written. Inputs are read and outputs written without
//! copies through [`crate::cpu`].
//!
//! Burn's flex convolution (tiles + NHWC copies + small products) took 96 % of our ResNet-18
//! time at 7× ONNX Runtime; see docs/executor.md for the figures of this path.

use super::sgemm::{self, DenseB, NR, PackedA, PanelSource, put_row, put_row_strided, zero_row};
use crate::cpu;
use crate::tensor::Tensor;
use std::sync::{Arc, Mutex};

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

impl Conv2dGeometry {
    /// The same convolution with height and width swapped, when the width is 1 throughout
    /// (input, kernel and output, no width padding: 1-d signals laid out `[N, C, L, 1]`).
    /// `[N, C, L, 1]` and `[N, C, 1, L]` are the same memory, and the swapped form gives the
    /// im2col rows of `L` values to copy instead of `L` rows of one value; the product's
    /// reduction order is unchanged, so are the numbers.
    pub(super) fn unit_width_as_height(&self) -> Option<Conv2dGeometry> {
        let unit_width = self.input[3] == 1 && self.weight[3] == 1 && self.output[1] == 1 && self.pads[1] == (0, 0);
        (unit_width && self.input[2] > 1).then(|| Conv2dGeometry {
            input: [self.input[0], self.input[1], 1, self.input[2]],
            weight: [self.weight[0], self.weight[1], 1, self.weight[2]],
            group: self.group,
            strides: [1, self.strides[0]],
            dilations: [1, self.dilations[0]],
            pads: [(0, 0), self.pads[0]],
            output: [1, self.output[0]],
        })
    }

    /// Every output channel reads one input channel (several groups of one channel each):
    /// computed directly ([`super::depthwise`]), not as 1-row matrix products.
    pub(super) fn depthwise(&self) -> bool {
        self.weight[1] == 1 && self.group > 1
    }

    /// A 1×1 convolution without stride, dilation or padding: B is the input itself.
    pub(super) fn pointwise(&self) -> bool {
        self.weight[2..] == [1, 1] && self.strides == [1, 1] && self.dilations == [1, 1] && self.pads == [(0, 0); 2]
    }
}

/// What was derived from the last weight buffer a kernel saw (by default its packed form: one
/// [`PackedA`] per group), so a model's constant weights are packed once, not on every run.
pub struct PackedWeights<T = Vec<PackedA>> {
    last: Mutex<Option<(Tensor, Arc<T>)>>,
}

impl<T> Default for PackedWeights<T> {
    fn default() -> Self {
        Self { last: Mutex::new(None) }
    }
}

impl<T> PackedWeights<T> {
    /// The value derived from `w`: kept while `w` is the same buffer, else made by `make`.
    pub(super) fn get_or(&self, w: &Tensor, make: impl FnOnce() -> T) -> Arc<T> {
        let mut last = self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((seen, packed)) = last.as_ref()
            && cpu::same_buffer(seen, w)
        {
            return packed.clone();
        }
        let packed = Arc::new(make());
        *last = Some((w.clone(), packed.clone()));
        packed
    }
}

fn pack_weights(w: &[f32], g: &Conv2dGeometry) -> Vec<PackedA> {
    let [m, cg, kh, kw] = g.weight;
    let (mg, k) = (m / g.group, cg * kh * kw);
    (0..g.group).map(|grp| PackedA::pack(&w[grp * mg * k..][..mg * k], mg, k)).collect()
}

/// `conv(x, w) + b` when all operands are contiguous CPU float32 tensors (the caller has
/// checked the shapes against `g`); `None` sends the caller to Burn's kernels.
pub fn try_conv2d(
    cache: Option<&PackedWeights>,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    g: &Conv2dGeometry,
) -> Option<Tensor> {
    let (xv, wv) = (cpu::f32_values(x)?, cpu::f32_values(w)?);
    let bv = match b {
        Some(b) => Some(cpu::f32_values(b)?),
        None => None,
    };
    let shape = [g.input[0], g.weight[0], g.output[0], g.output[1]];
    let swapped = g.unit_width_as_height();
    let g = swapped.as_ref().unwrap_or(g);
    if g.depthwise() {
        return Some(x.like_f32(&shape, super::depthwise::conv2d(xv, wv, bv, g)));
    }
    let packed = match cache {
        Some(cache) => cache.get_or(w, || pack_weights(wv, g)),
        None => Arc::new(pack_weights(wv, g)),
    };
    Some(x.like_f32(&shape, conv2d(xv, &packed, bv, g)))
}

/// `y = conv(x, w) + b` on a row-major input, with the weights packed per group; returns
/// `[n, m, oh, ow]`.
fn conv2d(x: &[f32], w: &[PackedA], bias: Option<&[f32]>, g: &Conv2dGeometry) -> Vec<f32> {
    let [n, c, h, wd] = g.input;
    let [m, cg, _, _] = g.weight;
    let [oh, ow] = g.output;
    let (mg, spatial) = (m / g.group, oh * ow);
    let mut y = vec![0f32; n * m * spatial];
    for b in 0..n {
        for (grp, a) in w.iter().enumerate() {
            let x_img = &x[(b * c + grp * cg) * h * wd..][..cg * h * wd];
            let y_grp = &mut y[(b * m + grp * mg) * spatial..][..mg * spatial];
            let bias_grp = bias.map(|bv| &bv[grp * mg..][..mg]);
            if g.pointwise() {
                sgemm::gemm(a, &DenseB { data: x_img, n: spatial }, spatial, bias_grp, y_grp);
            } else {
                sgemm::gemm(a, &Im2col { x: x_img, g }, spatial, bias_grp, y_grp);
            }
        }
    }
    y
}

/// The im2col matrix (`[cg·kh·kw, oh·ow]`) of one image's group of channels, packed on demand;
/// padding reads as 0.
struct Im2col<'a> {
    x: &'a [f32],
    g: &'a Conv2dGeometry,
}

impl PanelSource for Im2col<'_> {
    fn pack(&self, k0: usize, kc: usize, n0: usize, nc: usize, out: &mut [f32]) {
        let padded = nc.div_ceil(NR) * NR;
        im2col_pieces(self.x, self.g, k0..k0 + kc, n0, nc, |row, j, piece| {
            let kk = row - k0;
            match piece {
                Piece::Padding(len) => zero_row(out, kc, kk, j, len),
                Piece::Input { src, step: 1, len } => put_row(out, kc, kk, j, &src[..len]),
                Piece::Input { src, step, len } => put_row_strided(out, kc, kk, j, src, step, len),
            }
            if j + piece.len() == nc {
                zero_row(out, kc, kk, nc, padded - nc);
            }
        });
    }
}

/// A run of one im2col row: `len` columns of padding, or `len` input values read from `src`
/// every `step`-th.
pub(super) enum Piece<'a> {
    Padding(usize),
    Input { src: &'a [f32], step: usize, len: usize },
}

impl Piece<'_> {
    pub(super) fn len(&self) -> usize {
        match *self {
            Piece::Padding(len) | Piece::Input { len, .. } => len,
        }
    }
}

/// Walks rows `rows` and columns `n0..n0+nc` of the im2col matrix (`[cg·kh·kw, oh·ow]`) of one
/// image's group of channels `x`: `f(row, j, piece)` for each piece, in column order within a
/// row, `j` counted from `n0`. Runs of columns split at output rows, so each reads one input
/// row (per kernel row).
pub(super) fn im2col_pieces(
    x: &[f32],
    g: &Conv2dGeometry,
    rows: std::ops::Range<usize>,
    n0: usize,
    nc: usize,
    mut f: impl FnMut(usize, usize, Piece<'_>),
) {
    let [_, _, h, wd] = g.input;
    let [_, _, kh, kw] = g.weight;
    let ow = g.output[1];
    let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
    let (ph, pw) = (g.pads[0].0 as isize, g.pads[1].0 as isize);
    let mut runs = Vec::with_capacity(nc / ow + 2);
    let mut col = n0;
    while col < n0 + nc {
        let (oy, ox) = (col / ow, col % ow);
        let len = (n0 + nc - col).min(ow - ox);
        runs.push((col - n0, len, (oy * sh) as isize - ph, (ox * sw) as isize - pw));
        col += len;
    }
    for row in rows {
        let (ch, ky, kx) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let plane = &x[ch * h * wd..][..h * wd];
        let (dy, dx) = ((ky * dh) as isize, (kx * dw) as isize);
        for &(j, len, iy0, ix00) in &runs {
            let iy = iy0 + dy;
            if iy < 0 || iy >= h as isize {
                f(row, j, Piece::Padding(len));
                continue;
            }
            let src = &plane[iy as usize * wd..][..wd];
            let ix0 = ix00 + dx;
            // Columns t with 0 <= ix0 + t·sw < wd read the input; the rest is padding.
            let lo = ((-ix0).max(0) as usize).div_ceil(sw).min(len);
            let hi = ((wd as isize - ix0).max(0) as usize).div_ceil(sw).clamp(lo, len);
            if lo > 0 {
                f(row, j, Piece::Padding(lo));
            }
            // A run wholly in the right padding (ix0 past the row) reads nothing.
            if hi > lo {
                let first = (ix0 + (lo * sw) as isize) as usize;
                f(row, j + lo, Piece::Input { src: &src[first..], step: sw, len: hi - lo });
            }
            if len > hi {
                f(row, j + hi, Piece::Padding(len - hi));
            }
        }
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

    fn geometry(
        input: [usize; 4],
        weight: [usize; 4],
        group: usize,
        strides: [usize; 2],
        dilations: [usize; 2],
        pads: [(usize, usize); 2],
    ) -> Conv2dGeometry {
        let out =
            |d: usize| (input[2 + d] + pads[d].0 + pads[d].1 - dilations[d] * (weight[2 + d] - 1) - 1) / strides[d] + 1;
        Conv2dGeometry { input, weight, group, strides, dilations, pads, output: [out(0), out(1)] }
    }

    #[test]
    fn matches_a_direct_convolution() {
        let cases = [
            // Strides, dilations, asymmetric pads, groups, batch 2.
            geometry([2, 4, 7, 6], [6, 2, 3, 2], 2, [2, 1], [1, 2], [(1, 2), (0, 1)]),
            // Output rows wider than a panel, stride 1 and 2, padding on both sides.
            geometry([1, 3, 9, 37], [7, 3, 3, 3], 1, [1, 1], [1, 1], [(1, 1), (1, 1)]),
            geometry([1, 3, 20, 41], [13, 3, 7, 7], 1, [2, 2], [1, 1], [(3, 3), (3, 3)]),
            // Pointwise (B is the input itself) and pointwise with stride.
            geometry([2, 5, 6, 11], [9, 5, 1, 1], 1, [1, 1], [1, 1], [(0, 0); 2]),
            geometry([1, 5, 6, 11], [9, 5, 1, 1], 1, [2, 2], [1, 1], [(0, 0); 2]),
            // Padding wider than the kernel reach: whole rows and columns of zeros.
            geometry([1, 2, 3, 3], [4, 2, 2, 2], 1, [1, 1], [1, 1], [(3, 2), (2, 3)]),
            // Columns reading two or more past the row's end, stride 1 (PP-OCRv4 rec's
            // right-padded 1-wide kernels: this indexed past the input row).
            // A block of columns starting inside a row's right padding (rows of 43 outputs, 40 of
            // them padding; blocks of 256 columns), stride 1 and 2.
            geometry([1, 2, 30, 3], [4, 2, 1, 1], 1, [1, 1], [1, 1], [(0, 0), (0, 40)]),
            geometry([1, 2, 30, 3], [4, 2, 1, 3], 1, [1, 2], [1, 1], [(0, 0), (1, 80)]),
            // Enough work to run threaded.
            geometry([1, 16, 30, 30], [40, 16, 3, 3], 1, [1, 1], [1, 1], [(1, 1), (1, 1)]),
            // Depthwise (direct path): 3×3 and 5×5, stride 2, dilation, asymmetric pads, a channel
            // multiplier of 2, padding past the kernel reach, enough planes to run threaded.
            geometry([2, 4, 9, 13], [4, 1, 3, 3], 4, [1, 1], [1, 1], [(1, 1), (1, 1)]),
            geometry([1, 3, 17, 23], [3, 1, 5, 5], 3, [2, 2], [1, 1], [(2, 2), (2, 2)]),
            geometry([1, 3, 11, 12], [6, 1, 3, 2], 3, [2, 1], [2, 2], [(1, 3), (0, 2)]),
            geometry([1, 2, 3, 3], [2, 1, 2, 2], 2, [1, 1], [1, 1], [(3, 2), (2, 3)]),
            geometry([1, 24, 40, 40], [24, 1, 3, 3], 24, [1, 1], [1, 1], [(1, 1), (1, 1)]),
            // Width 1 throughout (computed with height and width swapped): dense with stride 2
            // and padding, depthwise.
            geometry([1, 6, 33, 1], [5, 6, 3, 1], 1, [2, 1], [1, 1], [(1, 2), (0, 0)]),
            geometry([2, 4, 20, 1], [4, 1, 5, 1], 4, [1, 1], [2, 1], [(4, 4), (0, 0)]),
        ];
        for g in &cases {
            let [n, c, h, wd] = g.input;
            let [m, cg, kh, kw] = g.weight;
            let x: Vec<f32> = (0..n * c * h * wd).map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.25).collect();
            let w: Vec<f32> = (0..m * cg * kh * kw).map(|i| ((i * 11 % 7) as f32 - 3.0) * 0.5).collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.25 - 1.0).collect();
            let swapped = g.unit_width_as_height();
            assert_eq!(swapped.is_some(), g.input[3] == 1, "{:?}", g.input);
            let g_run = swapped.as_ref().unwrap_or(g);
            for bias in [None, Some(&b[..])] {
                let got = if g_run.depthwise() {
                    super::super::depthwise::conv2d(&x, &w, bias, g_run)
                } else {
                    conv2d(&x, &pack_weights(&w, g_run), bias, g_run)
                };
                let want = reference(&x, &w, bias, g);
                assert_eq!(got.len(), want.len());
                for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                    assert!((a - e).abs() <= 1e-4 * e.abs().max(1.0), "{:?} {:?} {i}: {a} vs {e}", g.input, g.weight);
                }
            }
        }
    }
}
