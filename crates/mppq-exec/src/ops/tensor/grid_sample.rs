//! GridSample (opset 16: 4-D, bilinear/nearest/bicubic; opset 20: any spatial rank,
//! linear/nearest/cubic): sample positions, neighbour indices and weights are computed on the
//! host from the grid exactly as the ONNX reference does (padding modes zeros, border,
//! reflection; align_corners), and the input is sampled on the device with one gather over
//! the flattened spatial axis followed by a weighted sum over the taps.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::Shape;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("GridSample", 16, build);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

struct GridSample {
    mode: Mode,
    padding: Padding,
    align_corners: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let default = if layer::opset(node) < 20 { "bilinear" } else { "linear" };
    let mode = match node.string("mode", default)?.as_str() {
        "nearest" => Mode::Nearest,
        "bilinear" | "linear" => Mode::Linear,
        "bicubic" | "cubic" => Mode::Cubic,
        other => return Err(node.err(format!("unsupported mode {other}"))),
    };
    let padding = match node.string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => return Err(node.err(format!("unsupported padding_mode {other}"))),
    };
    Ok(Box::new(GridSample { mode, padding, align_corners: node.int("align_corners", 0)? != 0 }))
}

fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 { hi - r } else { lo + r }
    } else {
        x
    }
}

fn cubic(x: f64) -> [f64; 4] {
    let a = -0.75;
    let x = x.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

impl GridSample {
    /// Index along one axis of a tap, or None when it reads zero padding.
    fn pixel(&self, i: i64, d: usize, lo: f64, hi: f64) -> Option<usize> {
        match self.padding {
            Padding::Zeros => (i >= 0 && (i as usize) < d).then_some(i as usize),
            Padding::Border => Some(i.clamp(0, d as i64 - 1) as usize),
            Padding::Reflection => Some((reflect(i as f64, lo, hi) as i64).clamp(0, d as i64 - 1) as usize),
        }
    }

    /// Per-axis (index, weight) taps of one sample position.
    fn axis_taps(&self, x: f64, d: usize, lo: f64, hi: f64) -> Vec<(Option<usize>, f64)> {
        match self.mode {
            Mode::Nearest => vec![(self.pixel(x as i64, d, lo, hi), 1.0)],
            Mode::Linear => {
                let x0 = x.floor();
                let r = x - x0;
                let i0 = x0 as i64;
                vec![(self.pixel(i0, d, lo, hi), 1.0 - r), (self.pixel(i0 + 1, d, lo, hi), r)]
            }
            Mode::Cubic => {
                let x0 = x.floor();
                let c = cubic(x - x0);
                let i0 = x0 as i64;
                (0..4).map(|k| (self.pixel(i0 - 1 + k as i64, d, lo, hi), c[k])).collect()
            }
        }
    }
}

impl Kernel for GridSample {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let grid = float_tensor(ctx, ins.tensor(1)?, "grid")?;
        let (xs, gs) = (x.shape(), grid.shape());
        let nd = xs.len().saturating_sub(2);
        if nd == 0 || gs.len() != xs.len() || gs[0] != xs[0] || gs[gs.len() - 1] != nd {
            return Err(shape_err(ctx, xs, gs, "X must be [N,C,D1..Dr] and grid [N,O1..Or,r]"));
        }
        let (n, c) = (xs[0], xs[1]);
        let dims = &xs[2..];
        let points: usize = gs[1..gs.len() - 1].iter().product();
        let mut out_shape = vec![n, c];
        out_shape.extend_from_slice(&gs[1..gs.len() - 1]);
        if points == 0 || n == 0 || c == 0 {
            return Ok(vec![Some(
                Tensor::from_dispatch(Dispatch::float_zeros(
                    Shape::from(out_shape),
                    &x.dispatch().device(),
                    x.burn_dtype().into(),
                ))
                .into(),
            )]);
        }
        if dims.contains(&0) {
            return Err(shape_err(ctx, xs, gs, "cannot sample an empty input"));
        }
        let per_axis: usize = match self.mode {
            Mode::Nearest => 1,
            Mode::Linear => 2,
            Mode::Cubic => 4,
        };
        let taps = per_axis.checked_pow(nd as u32).unwrap_or(usize::MAX);
        layer::check_output_size(ctx, &[n, taps, points])?;
        layer::check_output_size(ctx, &[n, c, taps, points])?;
        let g = grid.to_f64_vec();
        let mut idx = vec![0i64; n * taps * points];
        let mut wts = vec![0f32; n * taps * points];
        let (lo, hi): (Vec<f64>, Vec<f64>) = dims
            .iter()
            .map(|&d| if self.align_corners { (0.0, d as f64 - 1.0) } else { (-0.5, d as f64 - 0.5) })
            .unzip();
        for b in 0..n {
            for p in 0..points {
                let base = (b * points + p) * nd;
                let mut axis_taps = Vec::with_capacity(nd);
                for i in 0..nd {
                    let d = dims[i];
                    // The grid's last axis lists coordinates innermost first (x, y, z).
                    let v = g[base + nd - 1 - i];
                    let mut xf = if self.align_corners {
                        (v + 1.0) / 2.0 * (d as f64 - 1.0)
                    } else {
                        ((v + 1.0) * d as f64 - 1.0) / 2.0
                    };
                    // Bounded so index arithmetic stays exact (far points read padding or edges).
                    xf = if xf.is_nan() { -1e12 } else { xf.clamp(-1e12, 1e12) };
                    if self.mode == Mode::Nearest {
                        xf = xf.round_ties_even();
                    }
                    if xf < lo[i] || xf > hi[i] {
                        match self.padding {
                            Padding::Border => xf = xf.clamp(0.0, d as f64 - 1.0),
                            Padding::Reflection => xf = reflect(xf, lo[i], hi[i]),
                            Padding::Zeros => {}
                        }
                    }
                    axis_taps.push(self.axis_taps(xf, d, lo[i], hi[i]));
                }
                // Cartesian product of the per-axis taps.
                for t in 0..taps {
                    let (mut rem, mut flat, mut w, mut inside) = (t, 0usize, 1f64, true);
                    for i in (0..nd).rev() {
                        let (ix, wi) = axis_taps[i][rem % per_axis];
                        rem /= per_axis;
                        w *= wi;
                        match ix {
                            Some(ix) => flat += ix * dims[i + 1..].iter().product::<usize>(),
                            None => inside = false,
                        }
                    }
                    let k = (b * taps + t) * points + p;
                    if inside {
                        idx[k] = flat as i64;
                        wts[k] = w as f32;
                    }
                }
            }
        }
        let spatial: usize = dims.iter().product();
        let xd = reshape(x.into_dispatch(), &[n, c, spatial]);
        let dtype = Tensor::from_dispatch(xd.clone()).dtype();
        let idx = Tensor::from_i64(&[n, 1, taps * points], idx, ctx.device).into_dispatch();
        let idx = Dispatch::int_expand(idx, Shape::from(vec![n, c, taps * points]));
        let picked = reshape(Dispatch::float_gather(2, xd, idx), &[n, c, taps, points]);
        let w = Tensor::from_f32(&[n, 1, taps, points], wts, ctx.device).cast(dtype)?.into_dispatch();
        let y = Dispatch::float_sum_dim(Dispatch::float_mul(picked, w), 2);
        Ok(vec![Some(Tensor::from_dispatch(reshape(y, &out_shape)).into())])
    }
}
