//! RNN, GRU and LSTM: forward / reverse / bidirectional, layouts 0 and 1, optional bias,
//! initial states, sequence_lens (steps past a sequence's length leave its state unchanged and
//! output zeros), clip, GRU linear_before_reset, LSTM peepholes and input_forget, and the
//! activation functions of the spec (Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu,
//! ScaledTanh, HardSigmoid, Elu, Softsign, Softplus). The input projection of all steps is one
//! matmul; each step is a matmul with the recurrence weights and element-wise gate math.

use super::util::{float_tensor, reshape, shape_err};
use crate::error::Result;
use crate::registry::{Kernel, KernelContext, OpNode, OpRegistry};
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::{ActivationOps, BoolTensorOps, FloatTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{BoolDType, Shape, Slice};

pub fn register(r: &mut OpRegistry) {
    r.register_fn("RNN", 1, build);
    r.register_fn("GRU", 1, build);
    r.register_fn("LSTM", 1, build);
}

type D = DispatchTensor;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

#[derive(Clone, Copy)]
enum Act {
    Sigmoid,
    Tanh,
    Relu,
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    ScaledTanh(f64, f64),
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

fn gt(x: &D, v: f64) -> D {
    Dispatch::float_greater_elem(x.clone(), v.into(), BoolDType::Native)
}

impl Act {
    fn apply(self, x: D) -> D {
        match self {
            Act::Sigmoid => Dispatch::sigmoid(x),
            Act::Tanh => Dispatch::float_tanh(x),
            Act::Relu => Dispatch::relu(x),
            Act::Affine(a, b) => Dispatch::float_add_scalar(Dispatch::float_mul_scalar(x, a.into()), b.into()),
            Act::LeakyRelu(a) => {
                let m = gt(&x, 0.0);
                Dispatch::float_mask_where(Dispatch::float_mul_scalar(x.clone(), a.into()), m, x)
            }
            Act::ThresholdedRelu(a) => {
                let m = gt(&x, a);
                Dispatch::float_mask_where(Dispatch::float_mul_scalar(x.clone(), 0.0f64.into()), m, x)
            }
            Act::ScaledTanh(a, b) => Dispatch::float_mul_scalar(Dispatch::float_tanh(Dispatch::float_mul_scalar(x, b.into())), a.into()),
            Act::HardSigmoid(a, b) => Dispatch::float_clamp(Dispatch::float_add_scalar(Dispatch::float_mul_scalar(x, a.into()), b.into()), 0.0f64.into(), 1.0f64.into()),
            Act::Elu(a) => {
                let m = gt(&x, 0.0);
                let neg = Dispatch::float_mul_scalar(Dispatch::float_sub_scalar(Dispatch::float_exp(x.clone()), 1.0f64.into()), a.into());
                Dispatch::float_mask_where(neg, m, x)
            }
            Act::Softsign => {
                let den = Dispatch::float_add_scalar(Dispatch::float_abs(x.clone()), 1.0f64.into());
                Dispatch::float_div(x, den)
            }
            Act::Softplus => Dispatch::float_log(Dispatch::float_add_scalar(Dispatch::float_exp(x), 1.0f64.into())),
        }
    }
}

struct Recurrent {
    cell: Cell,
    dirs: usize,
    reverse_only: bool,
    /// Per direction: the cell's activations (1 for RNN, 2 for GRU, 3 for LSTM).
    acts: Vec<Vec<Act>>,
    clip: Option<f64>,
    layout: i64,
    linear_before_reset: bool,
    input_forget: bool,
    hidden_size: Option<usize>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let cell = match node.op.op_type.as_str() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru,
        _ => Cell::Lstm,
    };
    let (dirs, reverse_only) = match node.string("direction", "forward")?.as_str() {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        other => return Err(node.err(format!("unknown direction {other}"))),
    };
    let per = match cell {
        Cell::Rnn => 1,
        Cell::Gru => 2,
        Cell::Lstm => 3,
    };
    let names: Vec<String> = match node.op.attr("activations") {
        Some(a) => match a {
            mppq_ir::Attribute::Strings(v) => v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
            _ => return Err(node.err("activations must be strings")),
        },
        None => {
            let d: &[&str] = match cell {
                Cell::Rnn => &["Tanh"],
                Cell::Gru => &["Sigmoid", "Tanh"],
                Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            };
            d.iter().cycle().take(per * dirs).map(|s| s.to_string()).collect()
        }
    };
    if names.len() != per * dirs {
        return Err(node.err(format!("{} activations given, {} expected", names.len(), per * dirs)));
    }
    let alphas = node.floats("activation_alpha")?.unwrap_or_default();
    let betas = node.floats("activation_beta")?.unwrap_or_default();
    let (mut ai, mut bi) = (0, 0);
    let next = |v: &[f32], i: &mut usize, default: f64| -> f64 {
        let r = v.get(*i).map_or(default, |&x| f64::from(x));
        *i += 1;
        r
    };
    let mut acts = Vec::new();
    for name in &names {
        let act = match name.to_ascii_lowercase().as_str() {
            "sigmoid" => Act::Sigmoid,
            "tanh" => Act::Tanh,
            "relu" => Act::Relu,
            "affine" => Act::Affine(next(&alphas, &mut ai, 1.0), next(&betas, &mut bi, 0.0)),
            "leakyrelu" => Act::LeakyRelu(next(&alphas, &mut ai, 0.01)),
            "thresholdedrelu" => Act::ThresholdedRelu(next(&alphas, &mut ai, 1.0)),
            "scaledtanh" => Act::ScaledTanh(next(&alphas, &mut ai, 1.0), next(&betas, &mut bi, 1.0)),
            "hardsigmoid" => Act::HardSigmoid(next(&alphas, &mut ai, 0.2), next(&betas, &mut bi, 0.5)),
            "elu" => Act::Elu(next(&alphas, &mut ai, 1.0)),
            "softsign" => Act::Softsign,
            "softplus" => Act::Softplus,
            other => return Err(node.err(format!("unsupported activation {other}"))),
        };
        acts.push(act);
    }
    let acts = acts.chunks(per).map(<[Act]>::to_vec).collect();
    let clip = if node.has("clip") { Some(f64::from(node.float("clip", 0.0)?)) } else { None };
    let hidden_size = if node.has("hidden_size") {
        match node.int("hidden_size", 0)? {
            h if h > 0 => Some(h as usize),
            h => return Err(node.err(format!("hidden_size must be positive, got {h}"))),
        }
    } else {
        None
    };
    Ok(Box::new(Recurrent {
        cell,
        dirs,
        reverse_only,
        acts,
        clip,
        layout: node.int("layout", 0)?,
        linear_before_reset: node.int("linear_before_reset", 0)? != 0,
        input_forget: node.int("input_forget", 0)? != 0,
        hidden_size,
    }))
}

fn cols(x: D, start: usize, end: usize) -> D {
    Dispatch::float_slice(x, &[Slice::new(0, None, 1), Slice::new(start as isize, Some(end as isize), 1)])
}

fn row(x: &D, i: usize) -> D {
    let rank = x.shape().num_dims();
    let mut s: Vec<Slice> = (0..rank).map(|_| Slice::new(0, None, 1)).collect();
    s[0] = Slice::new(i as isize, Some(i as isize + 1), 1);
    let y = Dispatch::float_slice(x.clone(), &s);
    let shape: Vec<usize> = x.shape().to_vec()[1..].to_vec();
    reshape(y, &shape)
}

impl Recurrent {
    fn clip(&self, x: D) -> D {
        match self.clip {
            Some(c) => Dispatch::float_clamp(x, (-c).into(), c.into()),
            None => x,
        }
    }
}

impl Kernel for Recurrent {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = float_tensor(ctx, ins.tensor(0)?, "X")?;
        let w = float_tensor(ctx, ins.tensor(1)?, "W")?;
        let r = float_tensor(ctx, ins.tensor(2)?, "R")?;
        let b = ins.opt_tensor(3)?;
        let seq_lens = ins.opt_tensor(4)?;
        let init_h = ins.opt_tensor(5)?;
        let init_c = if self.cell == Cell::Lstm { ins.opt_tensor(6)? } else { None };
        let peep = if self.cell == Cell::Lstm { ins.opt_tensor(7)? } else { None };
        let gates = match self.cell {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        };
        let x = if self.layout == 1 { x.permute(&[1, 0, 2]) } else { x };
        let (xs, ws, rs) = (x.shape(), w.shape(), r.shape());
        if xs.len() != 3 || ws.len() != 3 || rs.len() != 3 || ws[0] != self.dirs || rs[0] != self.dirs || ws[1] % gates != 0 {
            return Err(shape_err(ctx, xs, ws, "X must be 3-D and W/R [directions, gates*hidden, ..]"));
        }
        let (t_len, batch, input) = (xs[0], xs[1], xs[2]);
        let h = ws[1] / gates;
        if self.hidden_size.is_some_and(|hs| hs != h) || ws[2] != input || rs[1] != gates * h || rs[2] != h || h == 0 {
            return Err(shape_err(ctx, ws, rs, "W/R shapes do not match the input and hidden sizes"));
        }
        let dtype = x.dtype();
        let check = |t: Option<Tensor>, shape: &[usize], what: &str| -> Result<Option<D>> {
            match t {
                None => Ok(None),
                Some(t) => {
                    let t = float_tensor(ctx, t, what)?;
                    if t.shape() != shape {
                        return Err(shape_err(ctx, t.shape(), shape.to_vec(), format!("{what} has the wrong shape")));
                    }
                    Ok(Some(t.cast(dtype)?.into_dispatch()))
                }
            }
        };
        let b = check(b, &[self.dirs, 2 * gates * h], "B")?;
        let state_shape = if self.layout == 1 { [batch, self.dirs, h] } else { [self.dirs, batch, h] };
        let lift_state = |s: Option<D>| s.map(|s| if self.layout == 1 { Dispatch::float_permute(s, &[1, 0, 2]) } else { s });
        let init_h = lift_state(check(init_h, &state_shape, "initial_h")?);
        let init_c = lift_state(check(init_c, &state_shape, "initial_c")?);
        let peep = check(peep, &[self.dirs, 3 * h], "P")?;
        let lens: Option<Vec<i64>> = match seq_lens {
            None => None,
            Some(s) => {
                if s.kind() != Kind::Int || s.shape() != [batch] {
                    return Err(shape_err(ctx, s.shape(), vec![batch], "sequence_lens must be int [batch]"));
                }
                Some(s.to_i64_vec())
            }
        };
        let (xd, wd, rd) = (x.into_dispatch(), w.cast(dtype)?.into_dispatch(), r.cast(dtype)?.into_dispatch());
        let dev = xd.device();
        let zeros = |shape: &[usize]| Dispatch::float_zeros(Shape::from(shape.to_vec()), &dev, xd.dtype().into());
        let x2 = reshape(xd.clone(), &[t_len * batch, input]);
        let mut ys = Vec::new();
        let mut hs = Vec::new();
        let mut cs = Vec::new();
        for dir in 0..self.dirs {
            let reverse = self.reverse_only || dir == 1;
            let acts = &self.acts[dir];
            let wt = Dispatch::float_transpose(row(&wd, dir));
            let rt = Dispatch::float_transpose(row(&rd, dir));
            // All input projections at once: [T*B, G*H] → per step rows.
            let mut xw = Dispatch::float_matmul(x2.clone(), wt);
            let (wb, rb) = match &b {
                Some(b) => {
                    let bd = row(b, dir);
                    let wb = Dispatch::float_slice(bd.clone(), &[Slice::new(0, Some((gates * h) as isize), 1)]);
                    let rb = Dispatch::float_slice(bd, &[Slice::new((gates * h) as isize, None, 1)]);
                    (Some(reshape(wb, &[1, gates * h])), Some(reshape(rb, &[1, gates * h])))
                }
                None => (None, None),
            };
            if let Some(wb) = &wb {
                xw = Dispatch::float_add(xw, wb.clone());
            }
            let xw = reshape(xw, &[t_len, batch, gates * h]);
            let mut h_t = init_h.as_ref().map_or_else(|| zeros(&[batch, h]), |s| row(s, dir));
            let mut c_t = init_c.as_ref().map_or_else(|| zeros(&[batch, h]), |s| row(s, dir));
            let p = peep.as_ref().map(|p| {
                let p = reshape(row(p, dir), &[1, 3 * h]);
                (cols(p.clone(), 0, h), cols(p.clone(), h, 2 * h), cols(p, 2 * h, 3 * h))
            });
            let mut out = vec![None; t_len];
            let steps: Vec<usize> = if reverse { (0..t_len).rev().collect() } else { (0..t_len).collect() };
            for t in steps {
                let xt = row(&xw, t);
                let mut hr = Dispatch::float_matmul(h_t.clone(), rt.clone());
                if let Some(rb) = &rb {
                    hr = Dispatch::float_add(hr, rb.clone());
                }
                let (h_new, c_new) = match self.cell {
                    Cell::Rnn => (acts[0].apply(self.clip(Dispatch::float_add(xt, hr))), None),
                    Cell::Gru => {
                        let zr = self.clip(Dispatch::float_add(cols(xt.clone(), 0, 2 * h), cols(hr.clone(), 0, 2 * h)));
                        let zr = acts[0].apply(zr);
                        let (z, rg) = (cols(zr.clone(), 0, h), cols(zr, h, 2 * h));
                        let hh = if self.linear_before_reset {
                            Dispatch::float_add(cols(xt, 2 * h, 3 * h), Dispatch::float_mul(rg, cols(hr, 2 * h, 3 * h)))
                        } else {
                            let rh = Dispatch::float_mul(rg, h_t.clone());
                            // (r ⊙ H) @ R_h^T + Rb_h
                            let rht = cols(rt.clone(), 2 * h, 3 * h);
                            let mut v = Dispatch::float_matmul(rh, rht);
                            if let Some(rb) = &rb {
                                v = Dispatch::float_add(v, cols(rb.clone(), 2 * h, 3 * h));
                            }
                            Dispatch::float_add(cols(xt, 2 * h, 3 * h), v)
                        };
                        let hh = acts[1].apply(self.clip(hh));
                        // H = (1 - z) * hh + z * H_prev = hh + z * (H_prev - hh)
                        let hn = Dispatch::float_add(hh.clone(), Dispatch::float_mul(z, Dispatch::float_sub(h_t.clone(), hh)));
                        (hn, None)
                    }
                    Cell::Lstm => {
                        let g = Dispatch::float_add(xt, hr);
                        let (mut i, mut o, mut f, c) = (cols(g.clone(), 0, h), cols(g.clone(), h, 2 * h), cols(g.clone(), 2 * h, 3 * h), cols(g, 3 * h, 4 * h));
                        if let Some((pi, _, pf)) = &p {
                            i = Dispatch::float_add(i, Dispatch::float_mul(pi.clone(), c_t.clone()));
                            f = Dispatch::float_add(f, Dispatch::float_mul(pf.clone(), c_t.clone()));
                        }
                        let i = acts[0].apply(self.clip(i));
                        let f = if self.input_forget {
                            Dispatch::float_add_scalar(Dispatch::float_neg(i.clone()), 1.0f64.into())
                        } else {
                            acts[0].apply(self.clip(f))
                        };
                        let c = acts[1].apply(self.clip(c));
                        let cn = Dispatch::float_add(Dispatch::float_mul(f, c_t.clone()), Dispatch::float_mul(i, c));
                        if let Some((_, po, _)) = &p {
                            o = Dispatch::float_add(o, Dispatch::float_mul(po.clone(), cn.clone()));
                        }
                        let o = acts[0].apply(self.clip(o));
                        let hn = Dispatch::float_mul(o, acts[2].apply(cn.clone()));
                        (hn, Some(cn))
                    }
                };
                // Sequences shorter than t keep their state and output zeros.
                let (h_next, c_next, y_t) = match &lens {
                    Some(l) => {
                        let m: Vec<bool> = l.iter().map(|&n| (t as i64) < n).collect();
                        let mask = Tensor::from_bool(&[batch, 1], m, ctx.device).into_dispatch();
                        let mask = Dispatch::bool_expand(mask, Shape::from(vec![batch, h]));
                        let hn = Dispatch::float_mask_where(h_t.clone(), mask.clone(), h_new.clone());
                        let cn = c_new.map(|c| Dispatch::float_mask_where(c_t.clone(), mask.clone(), c));
                        let y = Dispatch::float_mask_where(zeros(&[batch, h]), mask, h_new);
                        (hn, cn, y)
                    }
                    None => (h_new.clone(), c_new, h_new),
                };
                out[t] = Some(reshape(y_t, &[1, 1, batch, h]));
                h_t = h_next;
                if let Some(c) = c_next {
                    c_t = c;
                }
            }
            let out: Vec<D> = out.into_iter().flatten().collect();
            ys.push(if out.is_empty() { zeros(&[0, 1, batch, h]) } else { Dispatch::float_cat(out, 0) });
            hs.push(reshape(h_t, &[1, batch, h]));
            cs.push(reshape(c_t, &[1, batch, h]));
        }
        let mut y = Dispatch::float_cat(ys, 1);
        let mut yh = Dispatch::float_cat(hs, 0);
        let mut yc = Dispatch::float_cat(cs, 0);
        if self.layout == 1 {
            y = Dispatch::float_permute(y, &[2, 0, 1, 3]);
            yh = Dispatch::float_permute(yh, &[1, 0, 2]);
            yc = Dispatch::float_permute(yc, &[1, 0, 2]);
        }
        let mut outs = vec![Some(Tensor::from_dispatch(y).into()), Some(Tensor::from_dispatch(yh).into())];
        if self.cell == Cell::Lstm {
            outs.push(Some(Tensor::from_dispatch(yc).into()));
        }
        Ok(outs)
    }
}
