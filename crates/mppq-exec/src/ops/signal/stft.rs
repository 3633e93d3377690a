//! STFT: frames the signal (`frame_step`, `frame_length` or the window's length), applies the
//! optional window, and transforms each frame with the DFT core of [`super::dft`].

use super::dft::transform;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host::{self, one, require_float};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("STFT", 17, build);
}

struct Stft {
    onesided: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Stft { onesided: node.int("onesided", 1)? != 0 }))
}

fn scalar(ctx: &KernelContext<'_>, v: Option<Vec<i64>>, what: &str) -> Result<Option<i64>> {
    match v.as_deref() {
        None => Ok(None),
        Some([x]) => Ok(Some(*x)),
        Some(_) => Err(ctx.err(format!("{what} must be a scalar"))),
    }
}

impl Kernel for Stft {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        require_float(ctx, &x, "signal")?;
        let step = scalar(ctx, ins.ints(1)?, "frame_step")?.ok_or_else(|| ctx.err("frame_step is required"))?;
        let window = ins.opt_tensor(2)?;
        let fl = scalar(ctx, ins.ints(3)?, "frame_length")?;
        let xs = x.shape();
        if xs.len() != 3 || (xs[2] != 1 && xs[2] != 2) {
            return Err(ctx.err(format!("signal must be [batch, length, 1|2], got {xs:?}")));
        }
        let fl = match (fl, &window) {
            (Some(f), _) => f,
            (None, Some(w)) if w.rank() == 1 => w.shape()[0] as i64,
            _ => return Err(ctx.err("frame_length or a 1-D window is required")),
        };
        if step <= 0 || fl <= 0 || fl as usize > xs[1] {
            return Err(ctx.err(format!("invalid frame_step {step} / frame_length {fl} for a signal of {}", xs[1])));
        }
        let (step, fl) = (step as usize, fl as usize);
        let frames = (xs[1] - fl) / step + 1;
        host::check_size(ctx, &[xs[0], frames, fl, xs[2]])?;
        let idx: Vec<i64> = (0..frames).flat_map(|f| (0..fl).map(move |j| (f * step + j) as i64)).collect();
        let idx = Tensor::from_i64(&[frames * fl], idx, ctx.device);
        let mut framed = x.clone().select(1, &idx).reshape(&[xs[0], frames, fl, xs[2]]);
        if let Some(w) = window {
            if w.shape() != [fl] {
                return Err(ctx.err(format!("window must have shape [{fl}], got {:?}", w.shape())));
            }
            require_float(ctx, &w, "window")?;
            let w = w.cast(x.dtype())?.reshape(&[1, 1, fl, 1]).expand(&[xs[0], frames, fl, xs[2]]);
            framed = Tensor::from_dispatch(Dispatch::float_mul(framed.into_dispatch(), w.into_dispatch()));
        }
        one(transform(ctx, framed, 2, fl, self.onesided, false)?)
    }
}
