//! Attention (opsets 23 and 24): scaled dot-product attention on 3-D (heads packed in the
//! hidden axis) or 4-D inputs, with past key/value concatenation (present outputs), grouped
//! query heads, boolean or additive masks (padded to the total length), causal masking,
//! nonpad_kv_seqlen, softcap (applied before the mask, as in the current spec and test data),
//! softmax_precision and the four qk_matmul_output modes.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, reshape, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor, broadcast_shapes};
use crate::value::Value;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Dispatch, DispatchTensor};
use burn::tensor::Shape;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Attention", 23, build);
}

struct Attention {
    causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    qk_mode: i64,
    scale: Option<f32>,
    softcap: f32,
    softmax_float: Option<DataType>,
}

fn heads(node: &OpNode<'_>, name: &str) -> Result<Option<usize>> {
    if !node.has(name) {
        return Ok(None);
    }
    match node.int(name, 0)? {
        h if h > 0 => Ok(Some(h as usize)),
        h => Err(node.err(format!("{name} must be positive, got {h}"))),
    }
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let qk_mode = node.int("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&qk_mode) {
        return Err(node.err(format!("qk_matmul_output_mode {qk_mode} is not 0 to 3")));
    }
    let softmax_float = if node.has("softmax_precision") {
        match node.int("softmax_precision", 1)? {
            1 => Some(DataType::Float),
            11 => Some(DataType::Double),
            10 => Some(DataType::Float16),
            16 => Some(DataType::BFloat16),
            p => return Err(node.err(format!("softmax_precision {p} is not a float type"))),
        }
    } else {
        None
    };
    Ok(Box::new(Attention {
        causal: node.int("is_causal", 0)? != 0,
        q_heads: heads(node, "q_num_heads")?,
        kv_heads: heads(node, "kv_num_heads")?,
        qk_mode,
        scale: if node.has("scale") { Some(node.float("scale", 1.0)?) } else { None },
        softcap: node.float("softcap", 0.0)?,
        softmax_float,
    }))
}

/// [B, S, H*D] → [B, H, S, D].
fn split_heads(ctx: &KernelContext<'_>, t: Tensor, h: Option<usize>, what: &str) -> Result<Tensor> {
    let s = t.shape();
    let Some(h) = h else { return Err(ctx.err(format!("3-D {what} needs q_num_heads and kv_num_heads"))) };
    if !s[2].is_multiple_of(h) {
        return Err(shape_err(ctx, s, vec![h], format!("{what} hidden size is not a multiple of the head count")));
    }
    Ok(t.reshape(&[s[0], s[1], h, s[2] / h]).permute(&[0, 2, 1, 3]))
}

fn full(shape: &[usize], value: f64, like: &Tensor) -> DispatchTensor {
    let d = like.dispatch();
    Dispatch::float_full(
        Shape::from(shape.to_vec()),
        value.into(),
        &burn::backend::TensorMetadata::device(d),
        like.burn_dtype().into(),
    )
}

impl Kernel for Attention {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let q = float_tensor(ctx, ins.tensor(0)?, "Q")?;
        let k = float_tensor(ctx, ins.tensor(1)?, "K")?;
        let v = float_tensor(ctx, ins.tensor(2)?, "V")?;
        let mask = ins.opt_tensor(3)?;
        let past_k = ins.opt_tensor(4)?;
        let past_v = ins.opt_tensor(5)?;
        let nonpad = ins.opt_tensor(6)?;
        let rank = q.rank();
        if (rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank {
            return Err(shape_err(ctx, q.shape(), k.shape(), "Q, K and V must all be 3-D or all 4-D"));
        }
        if k.dtype() != q.dtype() || v.dtype() != q.dtype() {
            return Err(ctx.err("Q, K and V must have one type"));
        }
        let dtype = q.dtype();
        let (q, k, v) = if rank == 3 {
            (
                split_heads(ctx, q, self.q_heads, "Q")?,
                split_heads(ctx, k, self.kv_heads, "K")?,
                split_heads(ctx, v, self.kv_heads, "V")?,
            )
        } else {
            (q, k, v)
        };
        let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
        let (b, qh, ql, hd) = (qs[0], qs[1], qs[2], qs[3]);
        let kvh = ks[1];
        if ks[0] != b || vs[0] != b || vs[1] != kvh || ks[3] != hd || vs[2] != ks[2] || kvh == 0 || qh % kvh != 0 {
            return Err(shape_err(
                ctx,
                qs,
                ks,
                "Q, K, V shapes are inconsistent ([B,H,S,D], K/V heads dividing Q heads)",
            ));
        }
        let cat_past = |past: Option<Tensor>, cur: Tensor, what: &str| -> Result<Tensor> {
            match past {
                None => Ok(cur),
                Some(p) => {
                    let (ps, cs) = (p.shape(), cur.shape());
                    if p.dtype() != cur.dtype() || ps.len() != 4 || ps[0] != cs[0] || ps[1] != cs[1] || ps[3] != cs[3] {
                        return Err(shape_err(ctx, ps, cs, format!("{what} does not match")));
                    }
                    Ok(Tensor::cat(vec![p, cur], 2))
                }
            }
        };
        let past_len = past_k.as_ref().map_or(0, |p| p.shape().get(2).copied().unwrap_or(0));
        let k = cat_past(past_k, k, "past_key")?;
        let v = cat_past(past_v, v, "past_value")?;
        let total = k.shape()[2];
        if v.shape()[2] != total {
            return Err(shape_err(ctx, k.shape(), v.shape(), "present key and value lengths differ"));
        }
        let (present_k, present_v) = (k.clone(), v.clone());
        // Additive bias, broadcastable to [B, H, q, total].
        let mut bias: Option<DispatchTensor> = None;
        if let Some(m) = mask {
            let ms = m.shape();
            let ml = *ms.last().unwrap_or(&0);
            if ms.is_empty()
                || ms.len() > 4
                || ml > total
                || broadcast_shapes(&ms[..ms.len() - 1], &[b, qh, ql]).is_none()
            {
                return Err(shape_err(ctx, ms, vec![b, qh, ql, total], "attn_mask does not broadcast to the scores"));
            }
            let additive = match m.kind() {
                Kind::Bool => {
                    // true → 0, false → -inf.
                    let zeros = Tensor::from_dispatch(full(&ms, 0.0, &q));
                    let neg = Tensor::from_dispatch(full(&ms, f64::NEG_INFINITY, &q));
                    neg.mask_where(&m, zeros)
                }
                Kind::Float => m.cast(dtype)?,
                Kind::Int => return Err(ctx.err("attn_mask must be bool or float")),
            };
            let additive = if ml < total {
                let mut pad = ms.clone();
                if let Some(l) = pad.last_mut() {
                    *l = total - ml;
                }
                Tensor::cat(vec![additive, Tensor::from_dispatch(full(&pad, f64::NEG_INFINITY, &q))], ms.len() - 1)
            } else {
                additive
            };
            bias = Some(lift4(additive).into_dispatch());
        }
        if self.causal {
            let v: Vec<f32> = (0..ql)
                .flat_map(|i| (0..total).map(move |j| if j > i + past_len { f32::NEG_INFINITY } else { 0.0 }))
                .collect();
            let c = Tensor::from_f32(&[1, 1, ql, total], v, ctx.device).cast(dtype)?.into_dispatch();
            bias = Some(match bias {
                None => c,
                Some(b) => Dispatch::float_add(b, c),
            });
        }
        if let Some(n) = nonpad {
            let lens = n.to_i64_vec();
            if lens.len() != b {
                return Err(shape_err(ctx, n.shape(), vec![b], "nonpad_kv_seqlen must be [B]"));
            }
            let v: Vec<f32> = lens
                .iter()
                .flat_map(|&l| (0..total).map(move |j| if (j as i64) < l { 0.0 } else { f32::NEG_INFINITY }))
                .collect();
            let p = Tensor::from_f32(&[b, 1, 1, total], v, ctx.device).cast(dtype)?.into_dispatch();
            bias = Some(match bias {
                None => p,
                Some(x) => Dispatch::float_add(x, p),
            });
        }
        // Grouped heads: each K/V head serves qh / kvh consecutive query heads.
        let repeat = |t: Tensor| -> Tensor {
            if kvh == qh {
                return t;
            }
            let s = t.shape();
            t.reshape(&[s[0], kvh, 1, s[2], s[3]])
                .expand(&[s[0], kvh, qh / kvh, s[2], s[3]])
                .reshape(&[s[0], qh, s[2], s[3]])
        };
        let (k, v) = (repeat(k), repeat(v));
        let scale = self.scale.map_or(1.0 / (hd as f64).sqrt(), f64::from);
        let root = scale.sqrt();
        let qd = Dispatch::float_mul_scalar(q.into_dispatch(), root.into());
        let kt = Dispatch::float_mul_scalar(Dispatch::float_transpose(k.into_dispatch()), root.into());
        let scores = Dispatch::float_matmul(qd, kt);
        // Order of the current spec: QK (mode 0) → softcap (mode 1) → + mask (mode 2) →
        // softmax (mode 3); the softcap comes before the mask so -inf stays -inf.
        let mut qk_out = (self.qk_mode == 0).then(|| scores.clone());
        let mut x = scores;
        if self.softcap > 0.0 {
            let c = f64::from(self.softcap);
            x = Dispatch::float_mul_scalar(Dispatch::float_tanh(Dispatch::float_div_scalar(x, c.into())), c.into());
        }
        if self.qk_mode == 1 {
            qk_out = Some(x.clone());
        }
        if let Some(bias) = bias {
            x = Dispatch::float_add(x, bias);
        }
        if self.qk_mode == 2 {
            qk_out = Some(x.clone());
        }
        if let Some(p) = self.softmax_float {
            x = Tensor::from_dispatch(x).cast(p)?.into_dispatch();
        }
        let max = Dispatch::float_max_dim(x.clone(), 3);
        let e = Dispatch::float_exp(Dispatch::float_sub(x, max));
        let sum = Dispatch::float_sum_dim(e.clone(), 3);
        let probs = Tensor::from_dispatch(Dispatch::float_div(e, sum)).cast(dtype)?.into_dispatch();
        if self.qk_mode == 3 {
            qk_out = Some(probs.clone());
        }
        let y = Dispatch::float_matmul(probs, v.into_dispatch());
        let y = if rank == 3 {
            let s = burn::backend::TensorMetadata::shape(&y).to_vec();
            reshape(Dispatch::float_permute(y, &[0, 2, 1, 3]), &[s[0], s[2], s[1] * s[3]])
        } else {
            y
        };
        let qk_out = qk_out.map(|t| Tensor::from_dispatch(t).cast(dtype)).transpose()?;
        Ok(vec![
            Some(Tensor::from_dispatch(y).into()),
            Some(present_k.into()),
            Some(present_v.into()),
            qk_out.map(Value::from),
        ])
    }
}

/// The bias terms at rank 4 ([B, H, q, total] with leading 1s): cubecl broadcasts only tensors of
/// equal rank (flex also aligns ranks, numpy-style).
fn lift4(t: Tensor) -> Tensor {
    let s = t.shape();
    let mut shape = vec![1; 4usize.saturating_sub(s.len())];
    shape.extend_from_slice(&s);
    t.reshape(&shape)
}
