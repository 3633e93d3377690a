//! Pad (constant/reflect/edge/wrap): pads and value as attributes before opset 11, inputs
//! after (with the `axes` input of opset 18); negative pads crop. Constant padding concatenates
//! broadcast fills; the other modes are one `select` per axis with an exact source-index map.

use super::slice::slice_axis;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axes, filled, index_tensor, int_input, numel, one, scalar, select};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Pad", 1, build);
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

struct Pad {
    mode: Mode,
    /// Before opset 11: pads and value attributes.
    attrs: Option<(Vec<i64>, f32)>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let mode = match node.string("mode", "constant")?.as_str() {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "edge" => Mode::Edge,
        "wrap" if node.opset >= 19 => Mode::Wrap,
        other => return Err(node.err(format!("unknown mode `{other}`"))),
    };
    let attrs = if node.opset < 11 {
        let name = if node.opset < 2 { "paddings" } else { "pads" };
        let pads = node.ints(name)?.ok_or_else(|| node.err(format!("attribute `{name}` is required")))?;
        Some((pads, node.float("value", 0.0)?))
    } else {
        None
    };
    Ok(Box::new(Pad { mode, attrs }))
}

/// Where output position `p` (relative to the original start, may be outside `0..d`) reads from.
fn source(mode: Mode, p: i64, d: i64) -> i64 {
    match mode {
        Mode::Edge | Mode::Constant => p.clamp(0, d - 1),
        Mode::Wrap => p.rem_euclid(d),
        Mode::Reflect => {
            if d == 1 {
                return 0;
            }
            let m = p.rem_euclid(2 * (d - 1));
            if m >= d { 2 * (d - 1) - m } else { m }
        }
    }
}

impl Kernel for Pad {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let rank = x.rank();
        let dtype = x.dtype();
        let (pads, value, axis_list) = match &self.attrs {
            Some((p, v)) => (p.clone(), scalar(f64::from(*v), dtype, ctx.device)?, None),
            None => {
                let p = int_input(ctx, &ins.tensor(1)?, "pads")?;
                let v = match ins.opt_tensor(2)? {
                    Some(v) if v.numel() >= 1 => {
                        if v.dtype() != dtype {
                            return Err(ctx.err(format!("constant_value is {} but data is {}", v.dtype(), dtype)));
                        }
                        let n = v.numel();
                        let v = v.reshape(&[n]);
                        if n > 1 { slice_axis(v, 0, 0, 1, 1, ctx)? } else { v }
                    }
                    _ => scalar(0.0, dtype, ctx.device)?,
                };
                let a = match ins.opt_tensor(3)? {
                    Some(t) => Some(int_input(ctx, &t, "axes")?),
                    None => None,
                };
                (p, v, a)
            }
        };
        let ax = match axis_list {
            Some(a) => axes(ctx, &a, rank)?,
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * ax.len() {
            return Err(ctx.err(format!("pads has {} entries for {} axes", pads.len(), ax.len())));
        }
        // The padded size, checked against the tensor budget before anything is allocated.
        let mut out = x.shape();
        for (i, &a) in ax.iter().enumerate() {
            let size = out[a] as i128 + i128::from(pads[i]) + i128::from(pads[i + ax.len()]);
            out[a] = usize::try_from(size.max(0)).unwrap_or(usize::MAX);
        }
        numel(ctx, &out)?;
        let mut y = x;
        for (i, &a) in ax.iter().enumerate() {
            let (b, e) = (pads[i], pads[i + ax.len()]);
            if b == 0 && e == 0 {
                continue;
            }
            let d = y.shape()[a] as i64;
            // Crop first (negative pads).
            let (cb, ce) = ((-b).max(0), (-e).max(0));
            if cb + ce > d {
                return Err(ctx.err(format!("pads {b}, {e} crop more than the {d} elements of axis {a}")));
            }
            if cb > 0 || ce > 0 {
                y = slice_axis(y, a, cb, (d - cb - ce) as usize, 1, ctx)?;
            }
            let d = d - cb - ce;
            let (pb, pe) = (b.max(0), e.max(0));
            if pb == 0 && pe == 0 {
                continue;
            }
            if self.mode == Mode::Constant {
                let mut parts = Vec::with_capacity(3);
                let mut s = y.shape();
                if pb > 0 {
                    s[a] = pb as usize;
                    parts.push(filled(&value, &s, ctx.device)?);
                }
                if d > 0 {
                    parts.push(y);
                }
                if pe > 0 {
                    s[a] = pe as usize;
                    parts.push(filled(&value, &s, ctx.device)?);
                }
                y = if parts.len() == 1 { parts.remove(0) } else { Tensor::cat(parts, a) };
            } else {
                if d == 0 {
                    return Err(ctx.err(format!("cannot pad the empty axis {a} in this mode")));
                }
                let idx: Vec<i64> = (-pb..d + pe).map(|p| source(self.mode, p, d)).collect();
                y = select(y, a, &index_tensor(idx, ctx.device))?;
            }
        }
        one(y)
    }
}
