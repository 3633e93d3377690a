//! Resize (opsets 10 to 19) and Upsample: separable per-axis interpolation. For every resized
//! axis the sample positions, neighbour indices and weights are computed on the host (as in
//! the ONNX reference: coordinate transformation modes half_pixel, half_pixel_symmetric,
//! pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize; nearest with its four
//! rounding modes, linear and cubic with cubic_coeff_a, exclude_outside and antialias), then
//! applied on the device as a weighted sum of `select`s along the axis. Scales or sizes,
//! axes and keep_aspect_ratio_policy (opset 18) are supported.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor, normalize_axis};
use crate::value::Value;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, TensorMetadata};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Resize", 10, build);
    r.register_fn("Upsample", 7, build);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rounding {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

struct Resize {
    mode: Mode,
    transform: Transform,
    rounding: Rounding,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
    axes: Option<Vec<i64>>,
    policy: AspectPolicy,
    /// Input positions of roi / scales / sizes (None: not an input of this version).
    roi_input: Option<usize>,
    scales_input: Option<usize>,
    sizes_input: Option<usize>,
    /// Upsample-7: scales as an attribute.
    scales_attr: Option<Vec<f32>>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let upsample = node.op.op_type == "Upsample";
    let legacy = upsample || layer::opset(node) < 11;
    let mode = match node.string("mode", "nearest")?.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" if !legacy => Mode::Cubic,
        other => return Err(node.err(format!("unsupported mode {other}"))),
    };
    let transform = if legacy {
        Transform::Asymmetric
    } else {
        match node.string("coordinate_transformation_mode", "half_pixel")?.as_str() {
            "half_pixel" => Transform::HalfPixel,
            "half_pixel_symmetric" => Transform::HalfPixelSymmetric,
            "pytorch_half_pixel" => Transform::PytorchHalfPixel,
            "align_corners" => Transform::AlignCorners,
            "asymmetric" => Transform::Asymmetric,
            "tf_half_pixel_for_nn" => Transform::TfHalfPixelForNn,
            "tf_crop_and_resize" => Transform::TfCropAndResize,
            other => return Err(node.err(format!("unsupported coordinate_transformation_mode {other}"))),
        }
    };
    let rounding = if legacy {
        Rounding::Floor
    } else {
        match node.string("nearest_mode", "round_prefer_floor")?.as_str() {
            "round_prefer_floor" => Rounding::PreferFloor,
            "round_prefer_ceil" => Rounding::PreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            other => return Err(node.err(format!("unsupported nearest_mode {other}"))),
        }
    };
    let policy = match node.string("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        other => return Err(node.err(format!("unsupported keep_aspect_ratio_policy {other}"))),
    };
    let antialias = node.int("antialias", 0)? != 0;
    if antialias && mode == Mode::Nearest {
        return Err(node.err("antialias is not defined for nearest mode"));
    }
    let (roi_input, scales_input, sizes_input, scales_attr) = if upsample {
        if layer::opset(node) < 9 {
            (None, None, None, Some(node.floats("scales")?.unwrap_or_default()))
        } else {
            (None, Some(1), None, None)
        }
    } else if layer::opset(node) < 11 {
        (None, Some(1), None, None)
    } else {
        (Some(1), Some(2), Some(3), None)
    };
    Ok(Box::new(Resize {
        mode,
        transform,
        rounding,
        cubic_a: f64::from(node.float("cubic_coeff_a", -0.75)?),
        exclude_outside: node.int("exclude_outside", 0)? != 0,
        extrapolation: f64::from(node.float("extrapolation_value", 0.0)?),
        antialias,
        axes: node.ints("axes")?,
        policy,
        roi_input,
        scales_input,
        sizes_input,
        scales_attr,
    }))
}

/// One axis: `taps` of (indices, weights), each of the output length, plus which output
/// positions fall outside the crop (tf_crop_and_resize).
struct AxisPlan {
    taps: Vec<(Vec<i64>, Vec<f32>)>,
    outside: Option<Vec<bool>>,
}

impl Resize {
    /// The ONNX reference's coefficients for a position with fractional part `ratio` in (0, 1].
    fn coeffs(&self, ratio: f64, scale: f64) -> (i64, Vec<f64>) {
        match self.mode {
            Mode::Nearest => {
                let up = if ratio == 1.0 {
                    true
                } else {
                    match self.rounding {
                        Rounding::PreferFloor => ratio > 0.5,
                        Rounding::PreferCeil => ratio >= 0.5,
                        Rounding::Floor => false,
                        Rounding::Ceil => true,
                    }
                };
                (0, if up { vec![0.0, 1.0] } else { vec![1.0, 0.0] })
            }
            Mode::Linear => {
                let s = if self.antialias { scale.min(1.0) } else { 1.0 };
                let start = (-1.0 / s).floor() as i64 + 1;
                let n = 2 - 2 * start;
                let c: Vec<f64> =
                    (start..start + n).map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0)).collect();
                (start, normalise(c))
            }
            Mode::Cubic => {
                let s = if self.antialias { scale.min(1.0) } else { 1.0 };
                let a = self.cubic_a;
                let start = (-2.0 / s).floor() as i64 + 1;
                let end = 2 - start;
                let f = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let c: Vec<f64> = (start..end).map(|i| f(s * (i as f64 - ratio))).collect();
                (start, if self.antialias { normalise(c) } else { c })
            }
        }
    }

    fn plan_axis(&self, input: usize, output: usize, scale: f64, roi: (f64, f64)) -> AxisPlan {
        let (inf, out_f) = (input as f64, scale * input as f64);
        let mut taps: Vec<(Vec<i64>, Vec<f32>)> = Vec::new();
        let mut outside = vec![false; output];
        for (x, out_flag) in outside.iter_mut().enumerate() {
            let xf = x as f64;
            let x_ori = match self.transform {
                Transform::AlignCorners => {
                    if out_f == 1.0 {
                        0.0
                    } else {
                        xf * (inf - 1.0) / (out_f - 1.0)
                    }
                }
                Transform::Asymmetric => xf / scale,
                Transform::TfHalfPixelForNn => (xf + 0.5) / scale,
                Transform::TfCropAndResize => {
                    let span = roi.1 - roi.0;
                    let base =
                        if out_f == 1.0 { span * (inf - 1.0) / 2.0 } else { xf * span * (inf - 1.0) / (out_f - 1.0) };
                    base + roi.0 * (inf - 1.0)
                }
                Transform::PytorchHalfPixel => {
                    if out_f == 1.0 {
                        -0.5
                    } else {
                        (xf + 0.5) / scale - 0.5
                    }
                }
                Transform::HalfPixel => (xf + 0.5) / scale - 0.5,
                Transform::HalfPixelSymmetric => {
                    let adjustment = output as f64 / out_f;
                    let offset = inf / 2.0 * (1.0 - adjustment);
                    offset + (xf + 0.5) / scale - 0.5
                }
            };
            if self.transform == Transform::TfCropAndResize && (x_ori < 0.0 || x_ori > inf - 1.0) {
                *out_flag = true;
            }
            // Far-away positions all read the edge; bounding them keeps index arithmetic exact.
            let x_ori = if x_ori.is_nan() { 0.0 } else { x_ori.clamp(-1e12, 1e12) };
            let floor = x_ori.floor();
            let (base, ratio) = if x_ori == floor { (floor as i64 - 1, 1.0) } else { (floor as i64, x_ori - floor) };
            let (start, mut c) = self.coeffs(ratio, scale);
            let idx: Vec<i64> = (0..c.len() as i64).map(|k| base + start + k).collect();
            if self.exclude_outside {
                for (k, &i) in idx.iter().enumerate() {
                    if i < 0 || i >= input as i64 {
                        c[k] = 0.0;
                    }
                }
                c = normalise(c);
            }
            if self.mode == Mode::Nearest {
                // One tap: the neighbour with weight 1.
                let k = if c[1] > c[0] { 1 } else { 0 };
                let i = idx[k];
                push_tap(&mut taps, 0, x, output, i.clamp(0, input as i64 - 1), 1.0);
                continue;
            }
            for (k, (&i, &w)) in idx.iter().zip(&c).enumerate() {
                push_tap(&mut taps, k, x, output, i.clamp(0, input as i64 - 1), w as f32);
            }
        }
        let outside = outside.iter().any(|&o| o).then_some(outside);
        AxisPlan { taps, outside }
    }
}

fn normalise(c: Vec<f64>) -> Vec<f64> {
    let s: f64 = c.iter().sum();
    if s == 0.0 { c } else { c.into_iter().map(|v| v / s).collect() }
}

fn push_tap(taps: &mut Vec<(Vec<i64>, Vec<f32>)>, k: usize, x: usize, output: usize, index: i64, weight: f32) {
    while taps.len() <= k {
        taps.push((vec![0; output], vec![0.0; output]));
    }
    taps[k].0[x] = index;
    taps[k].1[x] = weight;
}

impl Kernel for Resize {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let xs = x.shape();
        let rank = xs.len();
        let present = |v: Option<Tensor>| v.filter(|t| t.numel() > 0);
        let roi = match self.roi_input {
            Some(i) => present(ins.opt_tensor(i)?).map(|t| t.to_f64_vec()),
            None => None,
        };
        let scales = match (self.scales_input, &self.scales_attr) {
            (_, Some(s)) => Some(s.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()),
            (Some(i), None) => present(ins.opt_tensor(i)?).map(|t| t.to_f32_vec().into_iter().map(f64::from).collect()),
            (None, None) => None,
        };
        let sizes = match self.sizes_input {
            Some(i) => present(ins.opt_tensor(i)?).map(|t| t.to_i64_vec()),
            None => None,
        };
        // The resized axes, in order.
        let axes: Vec<usize> = match &self.axes {
            None => (0..rank).collect(),
            Some(a) => {
                let mut v = Vec::new();
                for &ax in a {
                    match normalize_axis(ax, rank) {
                        Some(n) if !v.contains(&n) => v.push(n),
                        _ => return Err(ctx.err(format!("axes {a:?} are invalid for rank {rank}"))),
                    }
                }
                v
            }
        };
        let k = axes.len();
        let mut scale = vec![1.0f64; rank];
        let mut out = xs.clone();
        match (scales, sizes) {
            (Some(s), None) => {
                if s.len() != k || s.iter().any(|&v| v.is_nan() || v <= 0.0 || !v.is_finite()) {
                    return Err(ctx.err(format!("scales {s:?} must be {k} positive values")));
                }
                for (j, &a) in axes.iter().enumerate() {
                    scale[a] = s[j];
                    out[a] = (s[j] * xs[a] as f64).floor() as usize;
                }
            }
            (None, Some(sz)) => {
                if sz.len() != k || sz.iter().any(|&v| v < 0) {
                    return Err(ctx.err(format!("sizes {sz:?} must be {k} non-negative values")));
                }
                for (j, &a) in axes.iter().enumerate() {
                    if xs[a] == 0 {
                        return Err(shape_err(ctx, xs.clone(), vec![], "cannot resize an empty axis"));
                    }
                    scale[a] = sz[j] as f64 / xs[a] as f64;
                    out[a] = sz[j] as usize;
                }
                if self.policy != AspectPolicy::Stretch {
                    let pick = axes.iter().map(|&a| scale[a]);
                    let s = if self.policy == AspectPolicy::NotLarger {
                        pick.fold(f64::INFINITY, f64::min)
                    } else {
                        pick.fold(0.0, f64::max)
                    };
                    for &a in &axes {
                        scale[a] = s;
                        out[a] = (s * xs[a] as f64 + 0.5) as usize;
                    }
                }
            }
            (Some(_), Some(_)) => return Err(ctx.err("only one of scales and sizes may be given")),
            (None, None) => return Err(ctx.err("one of scales and sizes is required")),
        }
        layer::check_output_size(ctx, &out)?;
        let mut roi_full: Vec<(f64, f64)> = vec![(0.0, 1.0); rank];
        if self.transform == Transform::TfCropAndResize {
            let Some(r) = roi else { return Err(ctx.err("tf_crop_and_resize needs roi")) };
            if r.len() != 2 * k {
                return Err(ctx.err(format!("roi has {} values, expected {}", r.len(), 2 * k)));
            }
            for (j, &a) in axes.iter().enumerate() {
                roi_full[a] = (r[j], r[k + j]);
            }
        }
        if x.numel() == 0 && out.iter().product::<usize>() > 0 {
            return Err(shape_err(ctx, xs, out, "cannot resize an empty tensor to a non-empty one"));
        }
        let kind = x.kind();
        if kind == Kind::Bool || (kind == Kind::Int && self.mode != Mode::Nearest) {
            return Err(ctx.err(format!("{} inputs are not supported in this mode", x.dtype())));
        }
        let mut y = x;
        let mut outside_masks: Vec<(usize, Vec<bool>)> = Vec::new();
        for a in 0..rank {
            let identity = out[a] == xs[a] && scale[a] == 1.0 && self.transform != Transform::TfCropAndResize;
            // An empty tensor only changes shape: no interpolation plan (whose size follows the
            // axis, 880 million taps for a fuzzed scale of 8.8e8 after an axis scaled to 0).
            if identity || out[a] == 0 || xs[a] == 0 || y.numel() == 0 {
                if out[a] != xs[a] {
                    let mut s = y.shape();
                    s[a] = out[a];
                    y = Tensor::from_dispatch(Dispatch::float_zeros(
                        s.into(),
                        &y.dispatch().device(),
                        y.burn_dtype().into(),
                    ));
                }
                continue;
            }
            let plan = self.plan_axis(xs[a], out[a], scale[a], roi_full[a]);
            if let Some(o) = plan.outside {
                outside_masks.push((a, o));
            }
            // CPU float32: every tap in one pass (cpu/gather.rs), the same values.
            if kind == Kind::Float
                && let Some(values) = crate::cpu::f32_values(&y)
                && let Some(gathered) = crate::cpu::gather::weighted_taps(values, &y.shape(), a, &plan.taps)
            {
                let mut s = y.shape();
                s[a] = out[a];
                y = y.like_f32(&s, gathered);
                continue;
            }
            let mut wshape = vec![1; rank];
            wshape[a] = out[a];
            let mut acc: Option<burn::backend::DispatchTensor> = None;
            for (idx, w) in plan.taps {
                let idx = Tensor::from_i64(&[out[a]], idx, ctx.device);
                let picked = y.clone().select(a, &idx);
                if kind == Kind::Int {
                    acc = Some(picked.into_dispatch());
                    break;
                }
                let w = Tensor::from_f32(&wshape, w, ctx.device).cast(y.dtype())?.into_dispatch();
                let term = Dispatch::float_mul(picked.into_dispatch(), w);
                acc = Some(match acc {
                    None => term,
                    Some(s) => Dispatch::float_add(s, term),
                });
            }
            if let Some(acc) = acc {
                y = Tensor::from_dispatch(acc);
            }
        }
        if !outside_masks.is_empty() && kind == Kind::Float {
            // Positions outside the crop on any axis take the extrapolation value.
            let mut inside: Option<burn::backend::DispatchTensor> = None;
            for (a, o) in outside_masks {
                let mut s = vec![1; rank];
                s[a] = out[a];
                let m = Tensor::from_f32(&s, o.iter().map(|&v| if v { 0.0 } else { 1.0 }).collect(), ctx.device)
                    .cast(y.dtype())?
                    .into_dispatch();
                inside = Some(match inside {
                    None => m,
                    Some(p) => Dispatch::float_mul(p, m),
                });
            }
            if let Some(inside) = inside {
                let yd = y.into_dispatch();
                let keep = Dispatch::float_mul(yd, inside.clone());
                let outside = Dispatch::float_mul_scalar(
                    Dispatch::float_neg(Dispatch::float_sub_scalar(inside, 1.0f64.into())),
                    self.extrapolation.into(),
                );
                y = Tensor::from_dispatch(Dispatch::float_add(keep, outside));
            }
        }
        Ok(vec![Some(y.into())])
    }
}
