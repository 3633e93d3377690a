//! Hand-written 2-d max pooling of contiguous CPU float32 planes ([`max_pool2d`]); the MaxPool
//! operator calls it for such inputs when no Indices output is wanted.

/// A 2-d pooling window over `planes` planes of `h × w`.
pub struct Pool2d {
    pub input: [usize; 3],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Begin padding of height and width (end padding only shows in `output`).
    pub pads: [usize; 2],
    pub output: [usize; 2],
}

/// Max pooling of a contiguous CPU float32 input, one plane per task: Burn's flex pool was
/// 5–11 ms of ResNet-18's ~110. Each (kernel row, kernel column) is one pass over an output row
/// reading a contiguous run of input (rows are split into stride phases first), with the
/// in-bounds range computed up front: no padding tests in the loop, no dependency chain across
/// taps, and a plain comparison for the max (`f32::max`'s NaN rules, a data-dependent branch or
/// one output at a time each cost 2–3× here). Windows see only real input (padding never
/// wins), as ONNX defines; planes holding a NaN get NaN in every window that sees one.
pub fn max_pool2d(x: &[f32], g: &Pool2d) -> Vec<f32> {
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

#[cfg(test)]
mod tests {
    use super::{Pool2d, max_pool2d};

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
            let (got, want) = (max_pool2d(&x, g), reference(&x, g));
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(a == b || (a.is_nan() && b.is_nan()), "{:?} output {i}: {a} vs {b}", g.input);
            }
        }
    }
}
