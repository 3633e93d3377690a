//! Image resizing that gives Pillow's numbers bit for bit (`Image.resize`, Pillow ≥ 7), so
//! calibration tensors equal those of a torchvision/PIL preprocessing script. Pillow resamples
//! 8-bit images in two separable passes (horizontal, then vertical), each rounding to 8 bits,
//! with filter weights widened by the scale when shrinking (antialiasing) and held in 22-bit
//! fixed point; nearest neighbour is an affine lookup with an accumulated source position.
//! OpenCV's `cv2.resize` (no antialiasing, 11-bit weights) gives different numbers.

use serde::{Deserialize, Serialize};

/// Resampling filter, as Pillow names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    Nearest,
    Box,
    #[default]
    Bilinear,
    Hamming,
    Bicubic,
    Lanczos,
}

impl Interpolation {
    /// The filter's support radius at scale 1 and its kernel.
    fn filter(self) -> (f64, fn(f64) -> f64) {
        match self {
            Self::Nearest | Self::Box => (0.5, |x| if x > -0.5 && x <= 0.5 { 1.0 } else { 0.0 }),
            Self::Bilinear => (1.0, |x| (1.0 - x.abs()).max(0.0)),
            Self::Hamming => (1.0, |x| {
                let x = x.abs();
                if x == 0.0 {
                    1.0
                } else if x >= 1.0 {
                    0.0
                } else {
                    let px = x * std::f64::consts::PI;
                    px.sin() / px * (0.54 + 0.46 * px.cos())
                }
            }),
            Self::Bicubic => (2.0, |x| {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }),
            Self::Lanczos => (3.0, |x| if x > -3.0 && x < 3.0 { sinc(x) * sinc(x / 3.0) } else { 0.0 }),
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let px = x * std::f64::consts::PI;
        px.sin() / px
    }
}

/// An 8-bit image, `channels` interleaved values per pixel, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pixels {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub data: Vec<u8>,
}

impl Pixels {
    /// `self` resized to `width`×`height` with `filter`, as Pillow computes it.
    pub fn resize(&self, width: usize, height: usize, filter: Interpolation) -> Pixels {
        if (width, height) == (self.width, self.height) {
            return self.clone();
        }
        if filter == Interpolation::Nearest {
            return self.resize_nearest(width, height);
        }
        let horizontal = if width != self.width { self.pass(width, filter, Axis::Horizontal) } else { self.clone() };
        if height != self.height { horizontal.pass(height, filter, Axis::Vertical) } else { horizontal }
    }

    /// The sub-image at (`left`, `top`) of `width`×`height`, which must lie inside.
    pub fn crop(&self, left: usize, top: usize, width: usize, height: usize) -> Pixels {
        let c = self.channels;
        let mut data = Vec::with_capacity(width * height * c);
        for y in top..top + height {
            let row = (y * self.width + left) * c;
            data.extend_from_slice(&self.data[row..row + width * c]);
        }
        Pixels { width, height, channels: c, data }
    }

    /// `self` placed at (`left`, `top`) of a `width`×`height` canvas filled with `fill`.
    pub fn pad(&self, left: usize, top: usize, width: usize, height: usize, fill: u8) -> Pixels {
        let c = self.channels;
        let mut data = vec![fill; width * height * c];
        for y in 0..self.height {
            let from = y * self.width * c;
            let to = ((top + y) * width + left) * c;
            data[to..to + self.width * c].copy_from_slice(&self.data[from..from + self.width * c]);
        }
        Pixels { width, height, channels: c, data }
    }

    /// Pillow's `ImagingScaleAffine`: the source column of output column `x` is the integer part
    /// of a position that starts at half a step and advances by one step per column.
    fn resize_nearest(&self, width: usize, height: usize) -> Pixels {
        let lookup = |out: usize, input: usize| -> Vec<usize> {
            let step = input as f64 / out as f64;
            let mut position = step * 0.5;
            (0..out)
                .map(|_| {
                    let index = (position.max(0.0) as usize).min(input - 1);
                    position += step;
                    index
                })
                .collect()
        };
        let (xs, ys) = (lookup(width, self.width), lookup(height, self.height));
        let c = self.channels;
        let mut data = Vec::with_capacity(width * height * c);
        for &y in &ys {
            for &x in &xs {
                let at = (y * self.width + x) * c;
                data.extend_from_slice(&self.data[at..at + c]);
            }
        }
        Pixels { width, height, channels: c, data }
    }

    /// One separable pass to `out` samples along `axis` (Pillow's `ImagingResample{Horizontal,
    /// Vertical}_8bpc`).
    fn pass(&self, out: usize, filter: Interpolation, axis: Axis) -> Pixels {
        let input = match axis {
            Axis::Horizontal => self.width,
            Axis::Vertical => self.height,
        };
        let taps = Taps::new(input, out, filter);
        let (width, height) = match axis {
            Axis::Horizontal => (out, self.height),
            Axis::Vertical => (self.width, out),
        };
        let c = self.channels;
        let mut data = vec![0u8; width * height * c];
        // Distance in the source between two consecutive taps, in values.
        let stride = match axis {
            Axis::Horizontal => c,
            Axis::Vertical => self.width * c,
        };
        for y in 0..height {
            for x in 0..width {
                let (i, first) = match axis {
                    Axis::Horizontal => (x, (y * self.width) * c),
                    Axis::Vertical => (y, x * c),
                };
                let (start, weights) = taps.of(i);
                for ch in 0..c {
                    let base = first + start * stride + ch;
                    let mut sum: i64 = 1 << (PRECISION_BITS - 1);
                    for (k, w) in weights.iter().enumerate() {
                        sum += i64::from(self.data[base + k * stride]) * i64::from(*w);
                    }
                    data[(y * width + x) * c + ch] = clip8(sum);
                }
            }
        }
        Pixels { width, height, channels: c, data }
    }
}

#[derive(Clone, Copy)]
enum Axis {
    Horizontal,
    Vertical,
}

/// Pillow's fixed-point precision for 8-bit images: 32 − 8 − 2 bits.
const PRECISION_BITS: u32 = 22;

fn clip8(sum: i64) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The filter taps of every output sample: first source index and fixed-point weights
/// (Pillow's `precompute_coeffs` then `normalize_coeffs_8bpc`).
struct Taps {
    starts: Vec<usize>,
    counts: Vec<usize>,
    width: usize,
    weights: Vec<i32>,
}

impl Taps {
    fn new(input: usize, out: usize, filter: Interpolation) -> Self {
        let (support, kernel) = filter.filter();
        let scale = input as f64 / out as f64;
        let filter_scale = scale.max(1.0);
        let support = support * filter_scale;
        let width = support.ceil() as usize * 2 + 1;
        let (mut starts, mut counts, mut weights) = (Vec::new(), Vec::new(), vec![0i32; out * width]);
        let inverse = 1.0 / filter_scale;
        let mut k = vec![0f64; width];
        for o in 0..out {
            let center = (o as f64 + 0.5) * scale;
            // C's (int) cast truncates toward zero, then clamps to the image.
            let lo = ((center - support + 0.5) as i64).max(0) as usize;
            let hi = ((center + support + 0.5) as i64).min(input as i64) as usize;
            let count = hi.saturating_sub(lo).min(width);
            let mut total = 0.0;
            for (x, slot) in k.iter_mut().enumerate().take(count) {
                let w = kernel(((x + lo) as f64 - center + 0.5) * inverse);
                *slot = w;
                total += w;
            }
            for (x, slot) in k.iter().enumerate().take(count) {
                let w = if total != 0.0 { slot / total } else { *slot };
                let fixed = w * f64::from(1u32 << PRECISION_BITS);
                weights[o * width + x] = if w < 0.0 { (fixed - 0.5) as i32 } else { (fixed + 0.5) as i32 };
            }
            starts.push(lo);
            counts.push(count);
        }
        Self { starts, counts, width, weights }
    }

    fn of(&self, i: usize) -> (usize, &[i32]) {
        let at = i * self.width;
        (self.starts[i], &self.weights[at..at + self.counts[i]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(width: usize, height: usize) -> Pixels {
        let data = (0..width * height).map(|i| ((i * 37) % 256) as u8).collect();
        Pixels { width, height, channels: 1, data }
    }

    #[test]
    fn same_size_is_a_copy_and_constant_images_stay_constant() {
        let img = ramp(7, 5);
        assert_eq!(img.resize(7, 5, Interpolation::Lanczos), img);
        let flat = Pixels { width: 9, height: 4, channels: 3, data: vec![77; 9 * 4 * 3] };
        for f in [Interpolation::Bilinear, Interpolation::Bicubic, Interpolation::Lanczos, Interpolation::Box] {
            for (w, h) in [(3, 2), (20, 11), (9, 1)] {
                let out = flat.resize(w, h, f);
                assert!(out.data.iter().all(|v| *v == 77), "{f:?} {w}x{h}");
            }
        }
    }

    #[test]
    fn halving_with_box_averages_pairs() {
        let img = Pixels { width: 4, height: 1, channels: 1, data: vec![10, 20, 100, 201] };
        assert_eq!(img.resize(2, 1, Interpolation::Box).data, vec![15, 151]);
        assert_eq!(img.resize(2, 1, Interpolation::Nearest).data, vec![20, 201]);
    }

    #[test]
    fn crop_and_pad_place_pixels() {
        let img = ramp(4, 3);
        let c = img.crop(1, 1, 2, 2);
        assert_eq!(c.data, vec![img.data[5], img.data[6], img.data[9], img.data[10]]);
        let p = c.pad(1, 0, 4, 3, 255);
        assert_eq!(p.data[1], img.data[5]);
        assert_eq!(p.data[0], 255);
        assert_eq!(p.data.iter().filter(|v| **v == 255).count(), 8);
    }
}
