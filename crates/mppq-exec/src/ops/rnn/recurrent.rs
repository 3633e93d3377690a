//! RNN, GRU and LSTM: one recurrent kernel parameterised by the cell type. Directions
//! forward/reverse/bidirectional, initial states, sequence_lens (masked steps keep the state and
//! output zeros), layout 0/1, activations (all eleven of the spec, with activation_alpha/beta), clip, GRU linear_before_reset and
//! LSTM peepholes. The input projection of all steps is one matmul; each step is one more.

use crate::error::{ExecError, Result};
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::ops::{ActivationOps, BoolTensorOps, FloatTensorOps};
use burn::backend::{Dispatch, DispatchTensor, TensorMetadata};
use burn::tensor::{Scalar, Shape, Slice};

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

impl Cell {
    /// Number of gates stacked in W and R.
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
}

/// A gate activation with its parameters (ONNX RNN activation list).
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

impl Act {
    /// Parses a name, taking alpha/beta from the attribute lists in order (defaults otherwise).
    fn parse(
        name: &str,
        alphas: &mut impl Iterator<Item = f32>,
        betas: &mut impl Iterator<Item = f32>,
    ) -> Option<Self> {
        let mut a = |d: f64| alphas.next().map_or(d, f64::from);
        Some(match name.to_ascii_lowercase().as_str() {
            "sigmoid" => Act::Sigmoid,
            "tanh" => Act::Tanh,
            "relu" => Act::Relu,
            "affine" => {
                let al = a(1.0);
                Act::Affine(al, betas.next().map_or(0.0, f64::from))
            }
            "leakyrelu" => Act::LeakyRelu(a(0.01)),
            "thresholdedrelu" => Act::ThresholdedRelu(a(1.0)),
            "scaledtanh" => {
                let al = a(1.0);
                Act::ScaledTanh(al, betas.next().map_or(1.0, f64::from))
            }
            "hardsigmoid" => {
                let al = a(0.2);
                Act::HardSigmoid(al, betas.next().map_or(0.5, f64::from))
            }
            "elu" => Act::Elu(a(1.0)),
            "softsign" => Act::Softsign,
            "softplus" => Act::Softplus,
            _ => return None,
        })
    }
}

fn act(a: Act, x: D) -> D {
    let sc = Scalar::from;
    match a {
        Act::Sigmoid => Dispatch::sigmoid(x),
        Act::Tanh => Dispatch::float_tanh(x),
        Act::Relu => Dispatch::relu(x),
        Act::Affine(al, be) => Dispatch::float_add_scalar(Dispatch::float_mul_scalar(x, sc(al)), sc(be)),
        Act::LeakyRelu(al) => Dispatch::leaky_relu(x, sc(al)),
        Act::ThresholdedRelu(al) => {
            let keep = Dispatch::float_greater_elem(x.clone(), sc(al), crate::tensor::bool_for(&x));
            let zeros = Dispatch::float_zeros(x.shape(), &x.device(), x.dtype().into());
            Dispatch::float_mask_where(zeros, keep, x)
        }
        Act::ScaledTanh(al, be) => {
            Dispatch::float_mul_scalar(Dispatch::float_tanh(Dispatch::float_mul_scalar(x, sc(be))), sc(al))
        }
        Act::HardSigmoid(al, be) => Dispatch::hard_sigmoid(x, sc(al), sc(be)),
        Act::Elu(al) => {
            // x if x >= 0 else alpha * (exp(x) - 1)
            let neg = Dispatch::float_lower_elem(x.clone(), sc(0.0), crate::tensor::bool_for(&x));
            let e =
                Dispatch::float_mul_scalar(Dispatch::float_sub_scalar(Dispatch::float_exp(x.clone()), sc(1.0)), sc(al));
            Dispatch::float_mask_where(x, neg, e)
        }
        Act::Softsign => {
            let den = Dispatch::float_add_scalar(Dispatch::float_abs(x.clone()), sc(1.0));
            Dispatch::float_div(x, den)
        }
        Act::Softplus => Dispatch::float_log1p(Dispatch::float_exp(x)),
    }
}

struct Recurrent {
    cell: Cell,
    hidden: Option<usize>,
    /// (reverse?) per direction.
    dirs: Vec<bool>,
    /// Activations per direction: f, g, h as the cell needs.
    acts: Vec<Vec<Act>>,
    clip: Option<f32>,
    linear_before_reset: bool,
    layout: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let cell = match node.op.op_type.as_str() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru,
        _ => Cell::Lstm,
    };
    let dirs = match node.string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        d => return Err(node.err(format!("unknown direction `{d}`"))),
    };
    let per_dir: Vec<&str> = match cell {
        Cell::Rnn => vec!["Tanh"],
        Cell::Gru => vec!["Sigmoid", "Tanh"],
        Cell::Lstm => vec!["Sigmoid", "Tanh", "Tanh"],
    };
    let names: Vec<String> = match node.op.attr("activations") {
        Some(a) => match a {
            mppq_ir::Attribute::Strings(v) => v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
            _ => return Err(node.err("activations must be a list of strings")),
        },
        None => dirs.iter().flat_map(|_| per_dir.iter().map(|s| s.to_string())).collect(),
    };
    if names.len() != per_dir.len() * dirs.len() {
        return Err(node.err(format!("expected {} activations, got {}", per_dir.len() * dirs.len(), names.len())));
    }
    let alphas = node.floats("activation_alpha")?.unwrap_or_default();
    let betas = node.floats("activation_beta")?.unwrap_or_default();
    let (mut alphas, mut betas) = (alphas.into_iter(), betas.into_iter());
    let mut parsed = Vec::new();
    for n in &names {
        parsed.push(
            Act::parse(n, &mut alphas, &mut betas).ok_or_else(|| unsupported(node, &format!("activation `{n}`")))?,
        );
    }
    let acts = parsed.chunks(per_dir.len()).map(<[Act]>::to_vec).collect();
    if node.int("input_forget", 0)? != 0 {
        return Err(unsupported(node, "input_forget"));
    }
    let hidden = node.int("hidden_size", 0)?;
    Ok(Box::new(Recurrent {
        cell,
        hidden: (hidden > 0).then_some(hidden as usize),
        dirs,
        acts,
        clip: node.has("clip").then(|| node.float("clip", 0.0)).transpose()?,
        linear_before_reset: node.int("linear_before_reset", 0)? != 0,
        layout: node.int("layout", 0)?,
    }))
}

fn unsupported(node: &OpNode<'_>, what: &str) -> ExecError {
    ExecError::Unsupported {
        op_type: node.op.op_type.clone(),
        domain: "ai.onnx".into(),
        opset: node.opset,
        node: node.label().to_string(),
        hint: format!(" ({what})"),
    }
}

fn full_slices(rank: usize) -> Vec<Slice> {
    (0..rank).map(|_| Slice::new(0, None, 1)).collect()
}

/// `x[i]` along axis 0, dropping that axis.
fn index0(x: &D, i: usize) -> D {
    let s = x.shape().to_vec();
    let mut sl = full_slices(s.len());
    sl[0] = Slice::new(i as isize, Some(i as isize + 1), 1);
    Dispatch::float_reshape(Dispatch::float_slice(x.clone(), &sl), Shape::from(s[1..].to_vec()))
}

/// Columns `[k*h, (k+1)*h)` of a 2-D tensor.
fn chunk(x: &D, k: usize, h: usize) -> D {
    Dispatch::float_slice(
        x.clone(),
        &[Slice::new(0, None, 1), Slice::new((k * h) as isize, Some(((k + 1) * h) as isize), 1)],
    )
}

fn add(a: D, b: D) -> D {
    Dispatch::float_add(a, b)
}

fn mul(a: D, b: D) -> D {
    Dispatch::float_mul(a, b)
}

impl Recurrent {
    fn err_shape(&self, ctx: &KernelContext<'_>, what: &str, got: Vec<usize>, want: Vec<usize>) -> ExecError {
        ExecError::Shape {
            node: ctx.node.to_string(),
            op_type: ctx.op_type.to_string(),
            left: got,
            right: want,
            message: format!("({what}: got, expected) differ"),
        }
    }
}

impl Kernel for Recurrent {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let w = ins.tensor(1)?;
        let r = ins.tensor(2)?;
        let b = ins.opt_tensor(3)?;
        let lens = ins.ints(4)?;
        let h0 = ins.opt_tensor(5)?;
        let c0 = if self.cell == Cell::Lstm { ins.opt_tensor(6)? } else { None };
        let p = if self.cell == Cell::Lstm { ins.opt_tensor(7)? } else { None };
        for t in [&x, &w, &r] {
            if t.kind() != Kind::Float {
                return Err(ctx.err(format!("{} inputs are not supported", t.dtype())));
            }
        }
        let xs = x.shape();
        if xs.len() != 3 {
            return Err(ctx.err(format!("X must have rank 3, not shape {xs:?}")));
        }
        let batch_major = self.layout != 0;
        let x = if batch_major { x.permute(&[1, 0, 2]) } else { x };
        let xs = x.shape();
        let (steps, batch, input) = (xs[0], xs[1], xs[2]);
        let nd = self.dirs.len();
        let g = self.cell.gates();
        let ws = w.shape();
        let hidden = match self.hidden {
            Some(h) => h,
            None => ws.get(1).copied().unwrap_or(0) / g,
        };
        if hidden == 0 {
            return Err(ctx.err("hidden_size must be positive"));
        }
        if ws != [nd, g * hidden, input] {
            return Err(self.err_shape(ctx, "W", ws, vec![nd, g * hidden, input]));
        }
        if r.shape() != [nd, g * hidden, hidden] {
            return Err(self.err_shape(ctx, "R", r.shape(), vec![nd, g * hidden, hidden]));
        }
        if let Some(b) = &b
            && b.shape() != [nd, 2 * g * hidden]
        {
            return Err(self.err_shape(ctx, "B", b.shape(), vec![nd, 2 * g * hidden]));
        }
        let state_shape = if batch_major { vec![batch, nd, hidden] } else { vec![nd, batch, hidden] };
        let state = |t: Option<Tensor>, what: &str| -> Result<Option<Tensor>> {
            match t {
                Some(t) if t.shape() != state_shape => Err(self.err_shape(ctx, what, t.shape(), state_shape.clone())),
                Some(t) => Ok(Some(if batch_major { t.permute(&[1, 0, 2]) } else { t })),
                None => Ok(None),
            }
        };
        let h0 = state(h0, "initial_h")?;
        let c0 = state(c0, "initial_c")?;
        if let Some(p) = &p
            && p.shape() != [nd, 3 * hidden]
        {
            return Err(self.err_shape(ctx, "P", p.shape(), vec![nd, 3 * hidden]));
        }
        if let Some(l) = &lens
            && (l.len() != batch || l.iter().any(|v| *v < 0 || *v as usize > steps))
        {
            return Err(ctx.err(format!("sequence_lens {l:?} must have {batch} entries in [0, {steps}]")));
        }
        let lens = lens.filter(|l| l.iter().any(|v| *v as usize != steps));
        if steps == 0 {
            return Err(ctx.err("sequences of length 0 are not supported"));
        }
        let dev = ctx.device.dispatch();
        let fdt = x.burn_dtype().into();
        let zeros = || Dispatch::float_zeros(Shape::from(vec![batch, hidden]), dev, fdt);
        let xd = Dispatch::float_reshape(x.into_dispatch(), Shape::from(vec![steps * batch, input]));
        let (wd, rd) = (w.into_dispatch(), r.into_dispatch());
        let bd = b.map(Tensor::into_dispatch);
        let pd = p.map(Tensor::into_dispatch);
        let (h0d, c0d) = (h0.map(Tensor::into_dispatch), c0.map(Tensor::into_dispatch));
        let masks: Option<Vec<D>> = lens.as_ref().map(|l| {
            (0..steps)
                .map(|t| {
                    let m: Vec<bool> = l.iter().map(|v| (t as i64) < *v).collect();
                    let m = Tensor::from_bool(&[batch, 1], m, ctx.device).into_dispatch();
                    Dispatch::bool_expand(m, Shape::from(vec![batch, hidden]))
                })
                .collect()
        });
        let clip = |v: D| match self.clip {
            Some(c) => Dispatch::float_clamp(v, Scalar::from(f64::from(-c)), Scalar::from(f64::from(c))),
            None => v,
        };

        let mut ys: Vec<D> = Vec::with_capacity(nd);
        let mut hs: Vec<D> = Vec::with_capacity(nd);
        let mut cs: Vec<D> = Vec::with_capacity(nd);
        for (d, &reverse) in self.dirs.iter().enumerate() {
            let acts = &self.acts[d];
            let wt = Dispatch::float_transpose(index0(&wd, d)); // [I, G*H]
            let rt = Dispatch::float_transpose(index0(&rd, d)); // [H, G*H]
            let (wb, rb) = match &bd {
                Some(b) => {
                    let bb = index0(b, d);
                    let s = g * hidden;
                    let wb = Dispatch::float_slice(bb.clone(), &[Slice::new(0, Some(s as isize), 1)]);
                    let rb = Dispatch::float_slice(bb, &[Slice::new(s as isize, Some(2 * s as isize), 1)]);
                    let sh = Shape::from(vec![1, s]);
                    (Some(Dispatch::float_reshape(wb, sh.clone())), Some(Dispatch::float_reshape(rb, sh)))
                }
                None => (None, None),
            };
            // All input projections at once: [T*B, G*H] -> [T, B, G*H].
            let mut xw = Dispatch::float_matmul(xd.clone(), wt);
            if let Some(wb) = &wb {
                xw = add(xw, wb.clone());
            }
            // For GRU without linear_before_reset the recurrent bias of the h gate is added
            // outside the reset product; keep biases separate per gate below.
            let xw = Dispatch::float_reshape(xw, Shape::from(vec![steps, batch, g * hidden]));
            let peep = pd.as_ref().map(|p| {
                let pp = index0(p, d);
                let part = |k: usize| {
                    Dispatch::float_reshape(
                        Dispatch::float_slice(
                            pp.clone(),
                            &[Slice::new((k * hidden) as isize, Some(((k + 1) * hidden) as isize), 1)],
                        ),
                        Shape::from(vec![1, hidden]),
                    )
                };
                (part(0), part(1), part(2))
            });
            // GRU without linear_before_reset multiplies the h gate's R by (r ⊙ H) separately,
            // so the per-step product with H needs only the z and r columns.
            let split = self.cell == Cell::Gru && !self.linear_before_reset;
            let cols = |t: &D| {
                Dispatch::float_slice(
                    t.clone(),
                    &[Slice::new(0, None, 1), Slice::new(0, Some((2 * hidden) as isize), 1)],
                )
            };
            let rt_step = if split { cols(&rt) } else { rt.clone() };
            let rb_step = match &rb {
                Some(rb) if split => Some(cols(rb)),
                other => other.clone(),
            };
            let mut h = h0d.as_ref().map_or_else(zeros, |t| index0(t, d));
            let mut c = c0d.as_ref().map_or_else(zeros, |t| index0(t, d));
            let mut y: Vec<Option<D>> = vec![None; steps];
            let order: Vec<usize> = if reverse { (0..steps).rev().collect() } else { (0..steps).collect() };
            for t in order {
                let xt = index0(&xw, t); // [B, G*H]
                let mut hr = Dispatch::float_matmul(h.clone(), rt_step.clone()); // [B, G*H] (GRU: maybe 2H)
                if let Some(rb) = &rb_step {
                    hr = add(hr, rb.clone());
                }
                let (h_new, c_new) = match self.cell {
                    Cell::Rnn => (act(acts[0], clip(add(xt, hr))), None),
                    Cell::Gru => {
                        let z = act(acts[0], clip(add(chunk(&xt, 0, hidden), chunk(&hr, 0, hidden))));
                        let rg = act(acts[0], clip(add(chunk(&xt, 1, hidden), chunk(&hr, 1, hidden))));
                        let hh = if self.linear_before_reset {
                            add(chunk(&xt, 2, hidden), mul(rg, chunk(&hr, 2, hidden)))
                        } else {
                            // (r ⊙ H) Rh^T + Rbh
                            let rh_t = chunk(&rt, 2, hidden);
                            let mut v = Dispatch::float_matmul(mul(rg, h.clone()), rh_t);
                            if let Some(rb) = &rb {
                                v = add(v, chunk(rb, 2, hidden));
                            }
                            add(chunk(&xt, 2, hidden), v)
                        };
                        let hh = act(acts[1], clip(hh));
                        // H = (1 - z) ⊙ hh + z ⊙ H  =  hh + z ⊙ (H - hh)
                        let hn = add(hh.clone(), mul(z, Dispatch::float_sub(h.clone(), hh)));
                        (hn, None)
                    }
                    Cell::Lstm => {
                        let pre = |k: usize| add(chunk(&xt, k, hidden), chunk(&hr, k, hidden));
                        let (mut i, o0, mut f, cc) = (pre(0), pre(1), pre(2), pre(3));
                        if let Some((pi, _, pf)) = &peep {
                            i = add(i, mul(pi.clone(), c.clone()));
                            f = add(f, mul(pf.clone(), c.clone()));
                        }
                        let i = act(acts[0], clip(i));
                        let f = act(acts[0], clip(f));
                        let cc = act(acts[1], clip(cc));
                        let cn = add(mul(f, c.clone()), mul(i, cc));
                        let mut o = o0;
                        if let Some((_, po, _)) = &peep {
                            o = add(o, mul(po.clone(), cn.clone()));
                        }
                        let o = act(acts[0], clip(o));
                        let hn = mul(o, act(acts[2], cn.clone()));
                        (hn, Some(cn))
                    }
                };
                match &masks {
                    Some(m) => {
                        let m = &m[t];
                        y[t] = Some(Dispatch::float_mask_where(zeros(), m.clone(), h_new.clone()));
                        h = Dispatch::float_mask_where(h, m.clone(), h_new);
                        if let Some(cn) = c_new {
                            c = Dispatch::float_mask_where(c, m.clone(), cn);
                        }
                    }
                    None => {
                        y[t] = Some(h_new.clone());
                        h = h_new;
                        if let Some(cn) = c_new {
                            c = cn;
                        }
                    }
                }
            }
            let y: Vec<D> = y
                .into_iter()
                .map(|v| Dispatch::float_reshape(v.unwrap_or_else(zeros), Shape::from(vec![1, 1, batch, hidden])))
                .collect();
            ys.push(Dispatch::float_cat(y, 0)); // [T, 1, B, H]
            hs.push(Dispatch::float_reshape(h, Shape::from(vec![1, batch, hidden])));
            cs.push(Dispatch::float_reshape(c, Shape::from(vec![1, batch, hidden])));
        }
        let y = Tensor::from_dispatch(Dispatch::float_cat(ys, 1)); // [T, D, B, H]
        let yh = Tensor::from_dispatch(Dispatch::float_cat(hs, 0)); // [D, B, H]
        let yc = Tensor::from_dispatch(Dispatch::float_cat(cs, 0));
        let (y, yh, yc) = if batch_major {
            (y.permute(&[2, 0, 1, 3]), yh.permute(&[1, 0, 2]), yc.permute(&[1, 0, 2]))
        } else {
            (y, yh, yc)
        };
        let mut out = vec![Some(y.into()), Some(yh.into())];
        if self.cell == Cell::Lstm {
            out.push(Some(yc.into()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::util::axes::run_single;
    use crate::{Device, Tensor};
    use mppq_ir::{Attribute, Operation};

    fn vals(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| (((i as u32 * 7919 + seed * 104729) % 97) as f32 / 48.5) - 1.0).collect()
    }

    /// Host reference of a tanh RNN over one direction, honouring sequence lengths.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f32],
        w: &[f32],
        r: &[f32],
        b: &[f32],
        lens: &[usize],
        t_n: usize,
        b_n: usize,
        i_n: usize,
        h_n: usize,
        reverse: bool,
        f: fn(f32) -> f32,
    ) -> (Vec<f32>, Vec<f32>) {
        let mut y = vec![0f32; t_n * b_n * h_n];
        let mut hf = vec![0f32; b_n * h_n];
        for bi in 0..b_n {
            let mut h = vec![0f32; h_n];
            let steps: Vec<usize> = if reverse { (0..lens[bi]).rev().collect() } else { (0..lens[bi]).collect() };
            for t in steps {
                let xt = &x[(t * b_n + bi) * i_n..(t * b_n + bi + 1) * i_n];
                let hn: Vec<f32> = (0..h_n)
                    .map(|k| {
                        let mut s = b[k] + b[h_n + k];
                        s += (0..i_n).map(|j| xt[j] * w[k * i_n + j]).sum::<f32>();
                        s += (0..h_n).map(|j| h[j] * r[k * h_n + j]).sum::<f32>();
                        f(s)
                    })
                    .collect();
                y[(t * b_n + bi) * h_n..(t * b_n + bi + 1) * h_n].copy_from_slice(&hn);
                h = hn;
            }
            hf[bi * h_n..(bi + 1) * h_n].copy_from_slice(&h);
        }
        (y, hf)
    }

    #[test]
    fn bidirectional_rnn_with_sequence_lengths_matches_reference() {
        let (t_n, b_n, i_n, h_n) = (3, 2, 2, 2);
        let d = Device::cpu();
        let x = vals(t_n * b_n * i_n, 1);
        let w = vals(2 * h_n * i_n, 2);
        let r = vals(2 * h_n * h_n, 3);
        let b = vals(2 * 2 * h_n, 4);
        let lens = [3usize, 2];
        let op = Operation::new("RNN", "rnn")
            .with_opset(14)
            .with_attr("hidden_size", Attribute::Int(h_n as i64))
            .with_attr("direction", Attribute::String(b"bidirectional".to_vec()));
        let out = run_single(
            op,
            vec![
                ("x", Some(Tensor::from_f32(&[t_n, b_n, i_n], x.clone(), &d))),
                ("w", Some(Tensor::from_f32(&[2, h_n, i_n], w.clone(), &d))),
                ("r", Some(Tensor::from_f32(&[2, h_n, h_n], r.clone(), &d))),
                ("b", Some(Tensor::from_f32(&[2, 2 * h_n], b.clone(), &d))),
                (
                    "lens",
                    Some(
                        Tensor::from_i64(&[b_n], lens.iter().map(|v| *v as i64).collect(), &d)
                            .cast(mppq_ir::DataType::Int32)
                            .unwrap(),
                    ),
                ),
            ],
            2,
        );
        assert_eq!(out[0].shape(), vec![t_n, 2, b_n, h_n]);
        let (y, yh) = (out[0].to_f32_vec(), out[1].to_f32_vec());
        for (dir, reverse) in [(0usize, false), (1, true)] {
            let (wy, wh) = reference(
                &x,
                &w[dir * h_n * i_n..(dir + 1) * h_n * i_n],
                &r[dir * h_n * h_n..(dir + 1) * h_n * h_n],
                &b[dir * 2 * h_n..(dir + 1) * 2 * h_n],
                &lens,
                t_n,
                b_n,
                i_n,
                h_n,
                reverse,
                f32::tanh,
            );
            for t in 0..t_n {
                for k in 0..b_n * h_n {
                    let got = y[(t * 2 + dir) * b_n * h_n + k];
                    assert!(
                        (got - wy[t * b_n * h_n + k]).abs() < 1e-5,
                        "dir {dir} t {t} k {k}: {got} vs {}",
                        wy[t * b_n * h_n + k]
                    );
                }
            }
            for k in 0..b_n * h_n {
                assert!((yh[dir * b_n * h_n + k] - wh[k]).abs() < 1e-5, "Y_h dir {dir} k {k}");
            }
        }
    }

    #[test]
    fn rnn_activation_with_alpha() {
        let (t_n, b_n, i_n, h_n) = (2, 1, 3, 2);
        let d = Device::cpu();
        let x = vals(t_n * b_n * i_n, 5);
        let w = vals(h_n * i_n, 6);
        let r = vals(h_n * h_n, 7);
        let op = Operation::new("RNN", "rnn")
            .with_opset(14)
            .with_attr("hidden_size", Attribute::Int(h_n as i64))
            .with_attr("activations", Attribute::Strings(vec![b"LeakyRelu".to_vec()]))
            .with_attr("activation_alpha", Attribute::Floats(vec![0.1]));
        let out = run_single(
            op,
            vec![
                ("x", Some(Tensor::from_f32(&[t_n, b_n, i_n], x.clone(), &d))),
                ("w", Some(Tensor::from_f32(&[1, h_n, i_n], w.clone(), &d))),
                ("r", Some(Tensor::from_f32(&[1, h_n, h_n], r.clone(), &d))),
            ],
            2,
        );
        fn leaky(v: f32) -> f32 {
            if v < 0.0 { 0.1 * v } else { v }
        }
        let (wy, _) = reference(&x, &w, &r, &vec![0.0; 2 * h_n], &[t_n], t_n, b_n, i_n, h_n, false, leaky);
        let y = out[0].to_f32_vec();
        assert!(y.iter().zip(&wy).all(|(a, b)| (a - b).abs() < 1e-5), "{y:?} vs {wy:?}");
    }
}
