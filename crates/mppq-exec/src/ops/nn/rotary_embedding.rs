//! RotaryEmbedding (opset 23): rotates the first `rotary_embedding_dim` features of each head
//! by position-dependent angles (cos/sin caches, optionally indexed by position_ids), in the
//! half-split or interleaved layout; 3-D inputs pack the heads in the hidden axis.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Slice;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("RotaryEmbedding", 23, build);
}

struct Rotary {
    interleaved: bool,
    rotary_dim: usize,
    num_heads: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let rotary_dim = node.int("rotary_embedding_dim", 0)?;
    let num_heads = node.int("num_heads", 0)?;
    if rotary_dim < 0 || num_heads < 0 {
        return Err(node.err("rotary_embedding_dim and num_heads must not be negative"));
    }
    Ok(Box::new(Rotary {
        interleaved: node.int("interleaved", 0)? != 0,
        rotary_dim: rotary_dim as usize,
        num_heads: num_heads as usize,
    }))
}

fn last(t: Tensor, start: usize, end: usize) -> Tensor {
    let rank = t.rank();
    let mut s: Vec<Slice> = (0..rank).map(|_| Slice::new(0, None, 1)).collect();
    s[rank - 1] = Slice::new(start as isize, Some(end as isize), 1);
    t.slice(&s)
}

impl Kernel for Rotary {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "input")?;
        let cos = float_tensor(ctx, ins.tensor(1)?, "cos_cache")?;
        let sin = float_tensor(ctx, ins.tensor(2)?, "sin_cache")?;
        let pos = ins.opt_tensor(3)?;
        let xs = x.shape();
        let dtype = x.dtype();
        // To [B, S, H, D].
        let x4 = match xs.len() {
            4 => x.permute(&[0, 2, 1, 3]),
            3 => {
                let h = self.num_heads;
                if h == 0 || !xs[2].is_multiple_of(h) {
                    return Err(shape_err(ctx, xs, vec![h], "3-D input needs num_heads dividing the hidden size"));
                }
                x.reshape(&[xs[0], xs[1], h, xs[2] / h])
            }
            _ => return Err(shape_err(ctx, xs, vec![], "input must be 3-D or 4-D")),
        };
        let s4 = x4.shape();
        let (b, s, h, d) = (s4[0], s4[1], s4[2], s4[3]);
        let r = if self.rotary_dim == 0 { d } else { self.rotary_dim };
        if r > d || r % 2 != 0 {
            return Err(shape_err(ctx, s4, vec![r], "rotary_embedding_dim must be even and at most the head size"));
        }
        let half = r / 2;
        let caches = |c: Tensor, what: &str| -> Result<Tensor> {
            let c = c.cast(dtype)?;
            let cs = c.shape();
            let c = match &pos {
                Some(p) => {
                    if p.kind() != Kind::Int || p.shape() != [b, s] || cs.len() != 2 || cs[1] != half {
                        return Err(shape_err(
                            ctx,
                            cs,
                            vec![b, s, half],
                            format!("{what} / position_ids have the wrong shape"),
                        ));
                    }
                    let ids = p.to_i64_vec();
                    if ids.iter().any(|&i| i < 0 || i as usize >= cs[0]) {
                        return Err(ctx.err("position_ids out of the cache range"));
                    }
                    let idx = Tensor::from_i64(&[ids.len()], ids, ctx.device);
                    c.select(0, &idx).reshape(&[b, s, 1, half])
                }
                None => {
                    if cs != [b, s, half] {
                        return Err(shape_err(
                            ctx,
                            cs,
                            vec![b, s, half],
                            format!("{what} must be [B, S, rotary_dim/2]"),
                        ));
                    }
                    c.reshape(&[b, s, 1, half])
                }
            };
            Ok(c)
        };
        let (cos, sin) = (caches(cos, "cos_cache")?.into_dispatch(), caches(sin, "sin_cache")?.into_dispatch());
        let rot = last(x4.clone(), 0, r);
        let (x1, x2) = if self.interleaved {
            let pairs = rot.reshape(&[b, s, h, half, 2]);
            (last(pairs.clone(), 0, 1).reshape(&[b, s, h, half]), last(pairs, 1, 2).reshape(&[b, s, h, half]))
        } else {
            (last(rot.clone(), 0, half), last(rot, half, r))
        };
        let (x1, x2) = (x1.into_dispatch(), x2.into_dispatch());
        let real = Dispatch::float_sub(
            Dispatch::float_mul(cos.clone(), x1.clone()),
            Dispatch::float_mul(sin.clone(), x2.clone()),
        );
        let imag = Dispatch::float_add(Dispatch::float_mul(sin, x1), Dispatch::float_mul(cos, x2));
        let (real, imag) = (Tensor::from_dispatch(real), Tensor::from_dispatch(imag));
        let rotated = if self.interleaved {
            Tensor::cat(vec![real.reshape(&[b, s, h, half, 1]), imag.reshape(&[b, s, h, half, 1])], 4)
                .reshape(&[b, s, h, r])
        } else {
            Tensor::cat(vec![real, imag], 3)
        };
        let y = if r < d { Tensor::cat(vec![rotated, last(x4, r, d)], 3) } else { rotated };
        let y = if xs.len() == 4 { y.permute(&[0, 2, 1, 3]) } else { y.reshape(&xs) };
        Ok(vec![Some(y.into())])
    }
}
