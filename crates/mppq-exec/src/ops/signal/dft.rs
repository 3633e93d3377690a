//! DFT (opset 17: `axis` attribute; opset 20: `axis` input) and the transform core STFT shares:
//! the signal axis is moved last, zero-padded or truncated to the DFT length, and multiplied by
//! cosine and sine matrices (forward `e^{-2 pi i kn/N}`, inverse `e^{+2 pi i kn/N}/N`);
//! `onesided` keeps the first N/2+1 bins (forward) or reads them as a Hermitian half spectrum
//! and returns the real signal (inverse). Computed in float64. Real input has a last dim of 1, complex of 2.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host::{axis, check_size, float_from_f64, one, require_float};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::{Shape, Slice};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("DFT", 17, build);
    r.register_fn("DFT", 20, build);
}

struct Dft {
    axis_attr: Option<i64>,
    inverse: bool,
    onesided: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let axis_attr = if node.opset < 20 { Some(node.int("axis", 1)?) } else { None };
    Ok(Box::new(Dft { axis_attr, inverse: node.int("inverse", 0)? != 0, onesided: node.int("onesided", 0)? != 0 }))
}

fn full_slices(shape: &[usize]) -> Vec<Slice> {
    shape.iter().map(|_| Slice::new(0, None, 1)).collect()
}

/// Transforms a complex signal `[.., L, 1|2]` along `sig_axis` (< rank-1) with an `n_fft`-point
/// DFT; returns `[.., M, 2]` with M = n_fft or n_fft/2+1 (onesided).
pub fn transform(
    ctx: &KernelContext<'_>,
    x: Tensor,
    sig_axis: usize,
    n_fft: usize,
    onesided: bool,
    inverse: bool,
) -> Result<Tensor> {
    let xs = x.shape();
    let r = xs.len();
    let c = xs[r - 1];
    if c != 1 && c != 2 {
        return Err(ctx.err(format!("the last dim must be 1 (real) or 2 (complex), got {c}")));
    }
    if n_fft == 0 {
        return Err(ctx.err("the DFT length must be positive"));
    }
    let dtype = x.burn_dtype();
    let inner: Vec<usize> = xs[..r - 1].to_vec();
    let part = |x: &Tensor, k: usize| -> Tensor {
        let mut s = full_slices(&xs);
        s[r - 1] = Slice::new(k as isize, Some(k as isize + 1), 1);
        x.clone().slice(&s).reshape(&inner)
    };
    // Move the signal axis last.
    let mut perm: Vec<usize> = (0..r - 1).filter(|d| *d != sig_axis).collect();
    perm.push(sig_axis);
    let mut inv = vec![0; r - 1];
    for (i, p) in perm.iter().enumerate() {
        inv[*p] = i;
    }
    let l = xs[sig_axis];
    // Inverse onesided (irfft): the input holds bins 0..=n/2 of a Hermitian spectrum and the
    // output is the real signal of n_fft samples.
    let irfft = inverse && onesided;
    let in_len = if irfft { n_fft / 2 + 1 } else { n_fft };
    let m = if irfft || !onesided { n_fft } else { n_fft / 2 + 1 };
    let f64t = burn::tensor::DType::F64;
    let prep = |t: Tensor| -> Result<Tensor> {
        let t = t.cast(mppq_ir::DataType::Double)?.permute(&perm);
        let mut s = t.shape();
        let last = s.len() - 1;
        Ok(if l > in_len {
            let mut sl = full_slices(&s);
            sl[last] = Slice::new(0, Some(in_len as isize), 1);
            t.slice(&sl)
        } else if l < in_len {
            s[last] = in_len - l;
            let z = Dispatch::float_zeros(Shape::from(s), ctx.device.dispatch(), f64t.into());
            Tensor::cat(vec![t, Tensor::from_dispatch(z)], last)
        } else {
            t
        })
    };
    // The transform matrices are in_len x m.
    check_size(ctx, &[in_len, m, 4])?;
    let re = prep(part(&x, 0))?;
    let im = if c == 2 { Some(prep(part(&x, 1))?) } else { None };
    let mut cosv = Vec::with_capacity(in_len * m);
    let mut sinv = Vec::with_capacity(in_len * m);
    let scale = if inverse { 1.0 / n_fft as f64 } else { 1.0 };
    for i in 0..in_len {
        // Hermitian weight of bin i in an irfft (counted twice unless DC or Nyquist).
        let w = if irfft && i != 0 && 2 * i != n_fft { 2.0 } else { 1.0 };
        for o in 0..m {
            let ang = 2.0 * std::f64::consts::PI * ((i * o) % n_fft) as f64 / n_fft as f64;
            cosv.push(ang.cos() * scale * w);
            sinv.push(ang.sin() * scale * w);
        }
    }
    let cm = float_from_f64(&[in_len, m], cosv, f64t, ctx).into_dispatch();
    let sm = float_from_f64(&[in_len, m], sinv, f64t, ctx).into_dispatch();
    let ps = re.shape();
    let mut out_shape = ps.clone();
    out_shape.push(2);
    if let Some(last) = out_shape.len().checked_sub(2) {
        out_shape[last] = m;
    }
    check_size(ctx, &out_shape)?;
    let rows: usize = ps[..ps.len() - 1].iter().product();
    let flat = |t: Tensor| Dispatch::float_reshape(t.into_dispatch(), Shape::from(vec![rows, in_len]));
    let mm = |a, b| Dispatch::float_matmul(a, b);
    let re2 = flat(re);
    // forward: Yr = Xr C + Xi S, Yi = Xi C - Xr S; inverse: Yr = Xr C - Xi S, Yi = Xi C + Xr S.
    let (mut yr, mut yi) = (mm(re2.clone(), cm.clone()), Dispatch::float_neg(mm(re2, sm.clone())));
    if inverse {
        yi = Dispatch::float_neg(yi);
    }
    if let Some(im) = im {
        let im2 = flat(im);
        let xs_ = mm(im2.clone(), sm);
        yr = if inverse { Dispatch::float_sub(yr, xs_) } else { Dispatch::float_add(yr, xs_) };
        yi = Dispatch::float_add(yi, mm(im2, cm));
    }
    let mut os = ps.clone();
    let last = os.len() - 1;
    os[last] = m;
    let back = |t| {
        let t = Tensor::from_dispatch(Dispatch::float_reshape(t, Shape::from(os.clone()))).permute(&inv);
        let mut s = t.shape();
        s.push(1);
        Tensor::from_dispatch(Dispatch::float_cast(t.reshape(&s).into_dispatch(), dtype.into()))
    };
    if irfft {
        return Ok(back(yr));
    }
    Ok(Tensor::cat(vec![back(yr), back(yi)], r - 1))
}

impl Kernel for Dft {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        require_float(ctx, &x, "input")?;
        let r = x.rank();
        if r < 2 {
            return Err(ctx.err("input must have rank >= 2 ([.., signal, 1|2])"));
        }
        let ax = match self.axis_attr {
            Some(a) => a,
            None => match ins.ints(2)?.as_deref() {
                None => -2,
                Some([a]) => *a,
                Some(_) => return Err(ctx.err("axis must be a scalar")),
            },
        };
        let a = axis(ctx, ax, r)?;
        if a == r - 1 {
            return Err(ctx.err("the DFT axis cannot be the last (complex) dim"));
        }
        let n_fft = match ins.ints(1)?.as_deref() {
            // irfft of L bins defaults to 2 (L - 1) samples.
            None if self.inverse && self.onesided => 2 * x.shape()[a].saturating_sub(1),
            None => x.shape()[a],
            Some([n]) if *n > 0 => *n as usize,
            Some(v) => return Err(ctx.err(format!("dft_length must be a positive scalar, got {v:?}"))),
        };
        one(transform(ctx, x, a, n_fft, self.onesided, self.inverse)?)
    }
}
