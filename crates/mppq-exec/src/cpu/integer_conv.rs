//! 2-d convolution on integer codes, for the integer-exact simulation ([`crate::simulation::integer`]):
//! the input holds centred activation codes (`q − z`, as float32), the weight and bias their
//! integer codes; the result is the int32 accumulator a QLinearConv kernel computes, converted
//! to float32. Computed on the integer matrix product ([`super::igemm`]): the input shifted by
//! `offset` into 0..=255 (padding is the shifted zero), the offset's contribution taken out
//! through the weights' row sums.
//!
//! Depthwise convolutions keep the float path (a few products per output: exact in float32),
//! and so does a weight whose codes do not fit in int8, and every convolution on a CPU where
//! the int8 kernel is slower than the float one ([`IgemmKernel::beats_float`]: no AVX2, aarch64,
//! AVX-512 without VNNI).

use super::conv::{Conv2dGeometry, PackedWeights, Piece, im2col_pieces};
use super::igemm::{self, CodeRows, DenseCodes, IgemmKernel, PackedCodes, to_bytes};
use crate::cpu;
use crate::tensor::Tensor;

/// The packed integer weights of the last weight buffer a kernel saw (one [`PackedCodes`] per
/// group; `None` when its values are not int8 codes).
pub type PackedCodeWeights = PackedWeights<Option<Vec<PackedCodes>>>;

/// The accumulator of `conv(x, w) + b` on codes (see the module), when all operands are
/// contiguous CPU float32 tensors holding codes and the convolution has an integer path;
/// `None` sends the caller to the float kernels (which compute the same values, exactly while
/// partial sums stay below 2²⁴).
pub fn try_conv2d_codes(
    cache: Option<&PackedCodeWeights>,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    g: &Conv2dGeometry,
    offset: u8,
) -> Option<Tensor> {
    // Where the int8 kernel is slower than the float one (no AVX2, aarch64; AVX-512 without
    // VNNI), the float path: exact while partial sums stay below 2²⁴.
    if !IgemmKernel::detect().beats_float() {
        return None;
    }
    let shape = [g.input[0], g.weight[0], g.output[0], g.output[1]];
    let swapped = g.unit_width_as_height();
    let g = swapped.as_ref().unwrap_or(g);
    if g.depthwise() {
        return None;
    }
    let (xv, wv) = (cpu::f32_values(x)?, cpu::f32_values(w)?);
    let bias = match b {
        Some(b) => cpu::f32_values(b)?.iter().map(|v| v.round_ties_even() as i32).collect(),
        None => vec![0; g.weight[0]],
    };
    let pack = || pack_codes(wv, g);
    let packed = match cache {
        Some(cache) => cache.get_or(w, pack),
        None => std::sync::Arc::new(pack()),
    };
    let packed = packed.as_ref().as_ref()?;
    Some(x.like_f32(&shape, conv2d_codes(xv, packed, &bias, g, offset)))
}

fn pack_codes(w: &[f32], g: &Conv2dGeometry) -> Option<Vec<PackedCodes>> {
    let [m, cg, kh, kw] = g.weight;
    let (mg, k) = (m / g.group, cg * kh * kw);
    (0..g.group).map(|grp| PackedCodes::pack(&w[grp * mg * k..][..mg * k], mg, k)).collect()
}

fn conv2d_codes(x: &[f32], w: &[PackedCodes], bias: &[i32], g: &Conv2dGeometry, offset: u8) -> Vec<f32> {
    let [n, c, h, wd] = g.input;
    let [m, cg, kh, kw] = g.weight;
    let [oh, ow] = g.output;
    let (mg, spatial, k) = (m / g.group, oh * ow, cg * kh * kw);
    // The shifted input adds `offset · Σ_k w` to every output: taken out with the bias.
    let bias: Vec<i32> = bias
        .chunks_exact(mg)
        .zip(w)
        .flat_map(|(group_bias, a)| group_bias.iter().zip(a.row_sums()))
        .map(|(&bv, &sum)| bv.wrapping_sub(i32::from(offset).wrapping_mul(sum)))
        .collect();
    let offset = f32::from(offset);
    let mut y = vec![0f32; n * m * spatial];
    for b in 0..n {
        for (grp, a) in w.iter().enumerate() {
            let x_img = &x[(b * c + grp * cg) * h * wd..][..cg * h * wd];
            let y_grp = &mut y[(b * m + grp * mg) * spatial..][..mg * spatial];
            let bias_grp = &bias[grp * mg..][..mg];
            if g.pointwise() {
                igemm::igemm(a, &DenseCodes { data: x_img, k, n: spatial, offset }, spatial, bias_grp, y_grp);
            } else {
                igemm::igemm(a, &Im2colCodes { x: x_img, g, offset }, spatial, bias_grp, y_grp);
            }
        }
    }
    y
}

/// The im2col matrix of one image's group of channels as shifted codes; padding reads as the
/// shifted zero (`offset`).
struct Im2colCodes<'a> {
    x: &'a [f32],
    g: &'a Conv2dGeometry,
    offset: f32,
}

impl CodeRows for Im2colCodes<'_> {
    fn rows(&self, n0: usize, nc: usize, out: &mut [u8], stride: usize) {
        let zero = self.offset as u8;
        let [_, cg, kh, kw] = self.g.weight;
        im2col_pieces(self.x, self.g, 0..cg * kh * kw, n0, nc, |row, j, piece| {
            let dst = &mut out[row * stride + j..][..piece.len()];
            match piece {
                Piece::Padding(_) => dst.fill(zero),
                Piece::Input { src, step, .. } => to_bytes(src, step, self.offset, dst),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    /// The integer path gives the exact accumulator of a direct convolution on codes (with the
    /// input's padding as a centred 0), beyond float32's exact range too.
    #[test]
    fn matches_an_exact_direct_convolution() {
        let geometry =
            |input: [usize; 4], weight: [usize; 4], group, strides: [usize; 2], pads: [(usize, usize); 2]| {
                let out = |d: usize| (input[2 + d] + pads[d].0 + pads[d].1 - (weight[2 + d] - 1) - 1) / strides[d] + 1;
                Conv2dGeometry { input, weight, group, strides, dilations: [1, 1], pads, output: [out(0), out(1)] }
            };
        let cases = [
            geometry([2, 4, 7, 6], [6, 2, 3, 2], 2, [2, 1], [(1, 2), (0, 1)]),
            geometry([1, 3, 20, 41], [13, 3, 7, 7], 1, [2, 2], [(3, 3), (3, 3)]),
            geometry([1, 5, 6, 11], [9, 5, 1, 1], 1, [1, 1], [(0, 0); 2]),
            geometry([1, 6, 33, 1], [5, 6, 3, 1], 1, [2, 1], [(1, 2), (0, 0)]),
            // K = 4608 of extreme codes: sums past 2²⁴, where float32 accumulation rounds.
            geometry([1, 512, 3, 3], [8, 512, 3, 3], 1, [1, 1], [(1, 1), (1, 1)]),
        ];
        let device = Device::cpu();
        for (offset, g) in [128u8, 0, 37, 128, 255].into_iter().zip(&cases) {
            let [n, c, h, wd] = g.input;
            let [m, cg, kh, kw] = g.weight;
            let lo = -f32::from(offset);
            let x: Vec<f32> = (0..n * c * h * wd).map(|i| (lo + ((i * 37 % 256) as f32)).min(255.0 + lo)).collect();
            let w: Vec<f32> = (0..m * cg * kh * kw).map(|i| [127.0, -128.0, (i % 255) as f32 - 127.0][i % 3]).collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 1000.0 - 3.0).collect();
            // Through the tensors where this CPU takes the integer path, else the packed product
            // on this CPU's int8 kernel directly.
            let got = if IgemmKernel::detect().beats_float() {
                try_conv2d_codes(
                    None,
                    &Tensor::from_f32(&g.input, x.clone(), &device),
                    &Tensor::from_f32(&g.weight, w.clone(), &device),
                    Some(&Tensor::from_f32(&[m], b.clone(), &device)),
                    g,
                    offset,
                )
                .expect("integer path")
                .to_f32_vec()
            } else {
                let g_run = g.unit_width_as_height();
                let g_run = g_run.as_ref().unwrap_or(g);
                let bias: Vec<i32> = b.iter().map(|v| *v as i32).collect();
                conv2d_codes(&x, &pack_codes(&w, g_run).expect("int8 codes"), &bias, g_run, offset)
            };
            let [oh, ow] = g.output;
            let mg = m / g.group;
            for (i, &v) in got.iter().enumerate() {
                let (bi, oc, oy, ox) = (i / (m * oh * ow), i / (oh * ow) % m, i / ow % oh, i % ow);
                let grp = oc / mg;
                let mut acc = b[oc] as i64;
                for ic in 0..cg {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let iy = (oy * g.strides[0] + ky) as isize - g.pads[0].0 as isize;
                            let ix = (ox * g.strides[1] + kx) as isize - g.pads[1].0 as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                continue;
                            }
                            let xv = x[((bi * c + grp * cg + ic) * h + iy as usize) * wd + ix as usize] as i64;
                            acc += xv * w[((oc * cg + ic) * kh + ky) * kw + kx] as i64;
                        }
                    }
                }
                assert_eq!(v, acc as f32, "{:?} {:?} output {i}", g.input, g.weight);
            }
        }
    }
}
