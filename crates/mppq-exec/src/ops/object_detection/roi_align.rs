//! RoiAlign: bilinear region-of-interest pooling (mode avg/max, coordinate_transformation_mode
//! half_pixel/output_half_pixel, sampling_ratio, spatial_scale), following the ONNX reference.
//! Runs on the host over the input values.

use crate::error::{ExecError, Result};
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("RoiAlign", 10, build);
}

struct RoiAlign {
    max: bool,
    out_h: usize,
    out_w: usize,
    sampling_ratio: i64,
    spatial_scale: f32,
    half_pixel: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let mode = node.string("mode", "avg")?;
    let max = match mode.as_str() {
        "avg" => false,
        "max" => true,
        m => return Err(node.err(format!("unknown mode `{m}`"))),
    };
    // Opset 16 added the attribute with half_pixel as default; before it, output_half_pixel.
    let default_ctm = if node.opset >= 16 { "half_pixel" } else { "output_half_pixel" };
    let half_pixel = match node.string("coordinate_transformation_mode", default_ctm)?.as_str() {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => return Err(node.err(format!("unknown coordinate_transformation_mode `{m}`"))),
    };
    let (oh, ow) = (node.int("output_height", 1)?, node.int("output_width", 1)?);
    if oh < 1 || ow < 1 {
        return Err(node.err("output_height and output_width must be >= 1"));
    }
    Ok(Box::new(RoiAlign {
        max,
        out_h: oh as usize,
        out_w: ow as usize,
        sampling_ratio: node.int("sampling_ratio", 0)?,
        spatial_scale: node.float("spatial_scale", 1.0)?,
        half_pixel,
    }))
}

struct Sample {
    pos: [usize; 4],
    w: [f32; 4],
}

impl Kernel for RoiAlign {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (x, rois, idx) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        let (xs, rs, is) = (x.shape(), rois.shape(), idx.shape());
        if x.kind() != Kind::Float || rois.kind() != Kind::Float {
            return Err(ctx.err("X and rois must be float tensors"));
        }
        if xs.len() != 4 || rs.len() != 2 || rs[1] != 4 || is.len() != 1 || is[0] != rs[0] {
            return Err(ExecError::Shape {
                node: ctx.node.to_string(),
                op_type: ctx.op_type.to_string(),
                left: xs,
                right: rs,
                message: "must be X [N, C, H, W] and rois [R, 4] with batch_indices [R]".into(),
            });
        }
        let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let r = rs[0];
        let xv = x.to_f32_vec();
        let rv = rois.to_f32_vec();
        let iv = idx.to_i64_vec();
        let (ph_n, pw_n) = (self.out_h, self.out_w);
        let mut out = vec![0f32; r * c * ph_n * pw_n];
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        for ri in 0..r {
            let b = iv[ri];
            if b < 0 || b as usize >= n {
                return Err(ctx.err(format!("batch index {b} is out of range for batch {n}")));
            }
            let b = b as usize;
            let roi = &rv[ri * 4..ri * 4 + 4];
            let s = self.spatial_scale;
            let (sw, sh) = (roi[0] * s - offset, roi[1] * s - offset);
            let (ew, eh) = (roi[2] * s - offset, roi[3] * s - offset);
            let (mut rw, mut rh) = (ew - sw, eh - sh);
            if !self.half_pixel {
                rw = rw.max(1.0);
                rh = rh.max(1.0);
            }
            let (bh, bw) = (rh / ph_n as f32, rw / pw_n as f32);
            let gh = if self.sampling_ratio > 0 {
                self.sampling_ratio as usize
            } else {
                (rh / ph_n as f32).ceil().max(0.0) as usize
            };
            let gw = if self.sampling_ratio > 0 {
                self.sampling_ratio as usize
            } else {
                (rw / pw_n as f32).ceil().max(0.0) as usize
            };
            let count = (gh * gw).max(1) as f32;
            let mut samples: Vec<Sample> = Vec::with_capacity(ph_n * pw_n * gh * gw);
            for ph in 0..ph_n {
                for pw in 0..pw_n {
                    for iy in 0..gh {
                        let yy = sh + ph as f32 * bh + (iy as f32 + 0.5) * bh / gh as f32;
                        for ix in 0..gw {
                            let xx = sw + pw as f32 * bw + (ix as f32 + 0.5) * bw / gw as f32;
                            samples.push(bilinear(yy, xx, h, w));
                        }
                    }
                }
            }
            for ci in 0..c {
                let plane = &xv[(b * c + ci) * h * w..(b * c + ci + 1) * h * w];
                for p in 0..ph_n * pw_n {
                    let group = &samples[p * gh * gw..(p + 1) * gh * gw];
                    let mut acc = 0f32;
                    let mut first = true;
                    for smp in group {
                        if self.max {
                            let v = (0..4).map(|k| smp.w[k] * plane[smp.pos[k]]).fold(f32::NEG_INFINITY, f32::max);
                            acc = if first { v } else { acc.max(v) };
                            first = false;
                        } else {
                            acc += (0..4).map(|k| smp.w[k] * plane[smp.pos[k]]).sum::<f32>();
                        }
                    }
                    out[(ri * c + ci) * ph_n * pw_n + p] = if self.max { acc } else { acc / count };
                }
            }
        }
        let y = Tensor::from_f32(&[r, c, ph_n, pw_n], out, ctx.device).cast(x.dtype())?;
        Ok(vec![Some(y.into())])
    }
}

fn bilinear(y: f32, x: f32, h: usize, w: usize) -> Sample {
    let (hf, wf) = (h as f32, w as f32);
    if y < -1.0 || y > hf || x < -1.0 || x > wf || h == 0 || w == 0 {
        return Sample { pos: [0; 4], w: [0.0; 4] };
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let mut yl = y as usize;
    let mut xl = x as usize;
    let yh;
    let xh;
    if yl >= h - 1 {
        yl = h - 1;
        yh = h - 1;
        y = yl as f32;
    } else {
        yh = yl + 1;
    }
    if xl >= w - 1 {
        xl = w - 1;
        xh = w - 1;
        x = xl as f32;
    } else {
        xh = xl + 1;
    }
    let (ly, lx) = (y - yl as f32, x - xl as f32);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Sample { pos: [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh], w: [hy * hx, hy * lx, ly * hx, ly * lx] }
}
