//! RoiAlign (opsets 10 and 16): average or max of bilinear samples over each bin of each
//! region of interest. Sample positions and their four-neighbour weights are computed on the
//! host exactly as the ONNX reference does; the input is gathered per region on the device.

use super::util::{check_output_size, float_tensor, reshape, shape_err};
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::Shape;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("RoiAlign", 10, build);
}

struct RoiAlign {
    max: bool,
    half_pixel: bool,
    out_h: usize,
    out_w: usize,
    sampling_ratio: i64,
    spatial_scale: f64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let max = match node.string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => return Err(node.err(format!("unsupported mode {other}"))),
    };
    let default = if super::util::opset(node) < 16 { "output_half_pixel" } else { "half_pixel" };
    let half_pixel = match node.string("coordinate_transformation_mode", default)?.as_str() {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => return Err(node.err(format!("unsupported coordinate_transformation_mode {other}"))),
    };
    let (h, w) = (node.int("output_height", 1)?, node.int("output_width", 1)?);
    let sampling_ratio = node.int("sampling_ratio", 0)?;
    if h < 1 || w < 1 || sampling_ratio < 0 {
        return Err(node.err("output_height/output_width must be positive and sampling_ratio not negative"));
    }
    Ok(Box::new(RoiAlign {
        max,
        half_pixel,
        out_h: h as usize,
        out_w: w as usize,
        sampling_ratio,
        spatial_scale: f64::from(node.float("spatial_scale", 1.0)?),
    }))
}

/// One sample: four flat positions and weights.
type Sample = ([i64; 4], [f64; 4]);

fn bilinear(y: f64, x: f64, height: usize, width: usize) -> Sample {
    let (hf, wf) = (height as f64, width as f64);
    if y < -1.0 || y > hf || x < -1.0 || x > wf {
        return ([0; 4], [0.0; 4]);
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let (mut y_low, mut x_low) = (y as usize, x as usize);
    let y_high = if y_low >= height - 1 {
        y_low = height - 1;
        y = y_low as f64;
        y_low
    } else {
        y_low + 1
    };
    let x_high = if x_low >= width - 1 {
        x_low = width - 1;
        x = x_low as f64;
        x_low
    } else {
        x_low + 1
    };
    let (ly, lx) = (y - y_low as f64, x - x_low as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    let w = width;
    (
        [(y_low * w + x_low) as i64, (y_low * w + x_high) as i64, (y_high * w + x_low) as i64, (y_high * w + x_high) as i64],
        [hy * hx, hy * lx, ly * hx, ly * lx],
    )
}

impl Kernel for RoiAlign {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let rois = float_tensor(ctx, ins.tensor(1)?, "rois")?;
        let bi = ins.tensor(2)?;
        let (xs, rs) = (x.shape(), rois.shape());
        if xs.len() != 4 || xs[2] == 0 || xs[3] == 0 || rs.len() != 2 || rs[1] != 4 || bi.kind() != Kind::Int || bi.shape() != [rs[0]] {
            return Err(shape_err(ctx, xs, rs, "X must be [N,C,H,W], rois [R,4] and batch_indices [R] integers"));
        }
        let (n, c, height, width) = (xs[0], xs[1], xs[2], xs[3]);
        let r_count = rs[0];
        let batch = bi.to_i64_vec();
        if batch.iter().any(|&b| b < 0 || b as usize >= n) {
            return Err(ctx.err("batch_indices out of range"));
        }
        if r_count == 0 || c == 0 {
            let d = x.dispatch();
            let z = Dispatch::float_zeros(Shape::from(vec![r_count, c, self.out_h, self.out_w]), &burn::backend::TensorMetadata::device(d), x.burn_dtype().into());
            return Ok(vec![Some(Tensor::from_dispatch(z).into())]);
        }
        let boxes = rois.to_f64_vec();
        let (ph, pw) = (self.out_h, self.out_w);
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        // Per region: samples per bin (grid_h * grid_w) and the sample list, bin-major.
        let mut per_roi: Vec<(usize, Vec<Sample>)> = Vec::with_capacity(r_count);
        for r in 0..r_count {
            let b = &boxes[r * 4..r * 4 + 4];
            let (sw, sh) = (b[0] * self.spatial_scale - offset, b[1] * self.spatial_scale - offset);
            let (ew, eh) = (b[2] * self.spatial_scale - offset, b[3] * self.spatial_scale - offset);
            let (mut rw, mut rh) = (ew - sw, eh - sh);
            if !self.half_pixel {
                rw = rw.max(1.0);
                rh = rh.max(1.0);
            }
            let (bh, bw) = (rh / ph as f64, rw / pw as f64);
            let grid = |size: f64, pooled: usize| -> usize {
                if self.sampling_ratio > 0 { self.sampling_ratio as usize } else { (size / pooled as f64).ceil().clamp(0.0, 1e6) as usize }
            };
            let (gh, gw) = (grid(rh, ph), grid(rw, pw));
            check_output_size(ctx, &[ph * pw, gh, gw, 4])?;
            let mut samples = Vec::with_capacity(ph * pw * gh * gw);
            for py in 0..ph {
                for px in 0..pw {
                    for iy in 0..gh {
                        let yy = sh + py as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                        for ix in 0..gw {
                            let xx = sw + px as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                            samples.push(bilinear(yy, xx, height, width));
                        }
                    }
                }
            }
            per_roi.push((gh * gw, samples));
        }
        let s_max = per_roi.iter().map(|p| p.0).max().unwrap_or(0).max(1);
        let bins = ph * pw;
        check_output_size(ctx, &[r_count, c, bins, s_max, 4])?;
        let taps = bins * s_max * 4;
        let mut idx = vec![0i64; r_count * taps];
        let mut wts = vec![0f32; r_count * taps];
        for (r, (s, samples)) in per_roi.iter().enumerate() {
            let count = (*s).max(1) as f64;
            for bin in 0..bins {
                for k in 0..s_max {
                    // Padding samples: zero weight for avg; a copy of the bin's first sample for max.
                    let (src, real) = if k < *s { (Some(bin * s + k), true) } else if *s > 0 && self.max { (Some(bin * s), false) } else { (None, false) };
                    let Some(src) = src else { continue };
                    let (pos, w) = samples[src];
                    for t in 0..4 {
                        let at = r * taps + (bin * s_max + k) * 4 + t;
                        idx[at] = pos[t];
                        wts[at] = if self.max { w[t] as f32 } else if real { (w[t] / count) as f32 } else { 0.0 };
                    }
                }
            }
        }
        let dtype = x.dtype();
        let sel = Tensor::from_i64(&[r_count], batch, ctx.device);
        let xr = reshape(x.select(0, &sel).into_dispatch(), &[r_count, c, height * width]);
        let idx = Tensor::from_i64(&[r_count, 1, taps], idx, ctx.device).into_dispatch();
        let idx = Dispatch::int_expand(idx, Shape::from(vec![r_count, c, taps]));
        let vals = reshape(Dispatch::float_gather(2, xr, idx), &[r_count, c, bins, s_max, 4]);
        let w = Tensor::from_f32(&[r_count, 1, bins, s_max, 4], wts, ctx.device).cast(dtype)?.into_dispatch();
        let weighted = Dispatch::float_mul(vals, w);
        let y = if self.max {
            Dispatch::float_max_dim(Dispatch::float_max_dim(weighted, 4), 3)
        } else {
            Dispatch::float_sum_dim(Dispatch::float_sum_dim(weighted, 4), 3)
        };
        Ok(vec![Some(Tensor::from_dispatch(reshape(y, &[r_count, c, ph, pw])).into())])
    }
}
