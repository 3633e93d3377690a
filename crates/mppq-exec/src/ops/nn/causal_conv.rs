//! CausalConvWithState (opset 27): depthwise causal 1-d convolution carrying state: the input
//! is prefixed with `past_state` (zeros when absent, K-1 steps), convolved without padding
//! (group = channels, optional bias, optional SiLU/Swish activation computed in float32), and
//! the last K-1 steps of the prefixed input become `present_state`.

use super::conv::conv_forward;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, Window, float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;
use burn::backend::ops::{ActivationOps, FloatTensorOps};
use burn::backend::{Dispatch, TensorMetadata};
use burn::tensor::{Shape, Slice};
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("CausalConvWithState", 27, build);
}

struct CausalConv {
    silu: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let silu = match node.string("activation", "none")?.to_ascii_lowercase().as_str() {
        "none" | "" => false,
        "silu" | "swish" => true,
        other => return Err(node.err(format!("unsupported activation {other}"))),
    };
    Ok(Box::new(CausalConv { silu }))
}

impl Kernel for CausalConv {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "input")?;
        let w = float_tensor(ctx, ins.tensor(1)?, "weight")?;
        let bias = ins.opt_tensor(2)?;
        let past = ins.opt_tensor(3)?;
        let (xs, ws) = (x.shape(), w.shape());
        if xs.len() != 3 || ws.len() != 3 || ws[0] != xs[1] || ws[1] != 1 || ws[2] == 0 || xs.contains(&0) {
            return Err(shape_err(ctx, xs, ws, "input must be [N,C,L] and weight [C,1,K]"));
        }
        let (n, c, k) = (xs[0], xs[1], ws[2]);
        let dtype = x.dtype();
        let past = match past {
            Some(p) => {
                let p = float_tensor(ctx, p, "past_state")?;
                if p.shape() != [n, c, k - 1] {
                    return Err(shape_err(ctx, p.shape(), vec![n, c, k - 1], "past_state must be [N,C,K-1]"));
                }
                p.cast(dtype)?
            }
            None => {
                let d = x.dispatch();
                Tensor::from_dispatch(Dispatch::float_zeros(
                    Shape::from(vec![n, c, k - 1]),
                    &d.device(),
                    d.dtype().into(),
                ))
            }
        };
        let padded = if k > 1 { Tensor::cat(vec![past, x], 2) } else { x };
        let total = padded.shape()[2];
        let present = padded.clone().slice(&[
            Slice::new(0, None, 1),
            Slice::new(0, None, 1),
            Slice::new((total - (k - 1)) as isize, Some(total as isize), 1),
        ]);
        let window =
            Window { kernel: None, strides: None, dilations: None, pads: None, auto_pad: layer::AutoPad::NotSet };
        // Half-precision inputs accumulate in float32 (then round to the input type, as the
        // function body's Conv output is).
        let wide = matches!(dtype, DataType::Float16 | DataType::BFloat16);
        let up = |t: Tensor| if wide { t.cast(DataType::Float) } else { Ok(t) };
        let bias = bias.map(up).transpose()?;
        let mut y = conv_forward(ctx, &window, c, up(padded)?, up(w)?, bias)?.cast(dtype)?;
        if self.silu {
            let f = y.cast(DataType::Float)?.into_dispatch();
            let s = Dispatch::float_mul(f.clone(), Dispatch::sigmoid(f));
            y = Tensor::from_dispatch(s).cast(dtype)?;
        }
        Ok(vec![Some(y.into()), Some(present.into())])
    }
}
