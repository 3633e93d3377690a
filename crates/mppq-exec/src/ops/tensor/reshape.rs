//! Operators that only change the shape, sharing one implementation (compute the new shape
//! exactly, check it, reshape): Reshape (0 = copy unless `allowzero`, -1 = infer), Flatten,
//! Squeeze and Unsqueeze (axes attribute before opset 13, input after).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{axes, int_input, numel, one, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Reshape", 1, build);
    r.register_fn("Flatten", 1, build);
    r.register_fn("Squeeze", 1, build);
    r.register_fn("Unsqueeze", 1, build);
}

enum Op {
    /// Target shape from the attribute (opset < 5) or input 1; `allowzero`.
    Reshape {
        shape: Option<Vec<i64>>,
        allowzero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Axes from the attribute (opset < 13) or input 1 (None: all unit dims).
    Squeeze {
        axes: Option<Vec<i64>>,
    },
    Unsqueeze {
        axes: Option<Vec<i64>>,
    },
}

struct ShapeOnly(Op);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let op = match node.op.op_type.as_str() {
        "Reshape" => {
            let shape = if node.opset < 5 {
                Some(node.ints("shape")?.ok_or_else(|| node.err("attribute `shape` is required"))?)
            } else {
                None
            };
            Op::Reshape { shape, allowzero: node.int("allowzero", 0)? != 0 }
        }
        "Flatten" => Op::Flatten { axis: node.int("axis", 1)? },
        "Squeeze" => Op::Squeeze { axes: if node.opset < 13 { node.ints("axes")? } else { None } },
        _ => {
            if node.opset < 13 {
                Op::Unsqueeze {
                    axes: Some(node.ints("axes")?.ok_or_else(|| node.err("attribute `axes` is required"))?),
                }
            } else {
                Op::Unsqueeze { axes: None }
            }
        }
    };
    Ok(Box::new(ShapeOnly(op)))
}

/// The output shape of Reshape: `0` copies the input dimension (unless `allowzero`), one `-1`
/// is inferred.
pub fn reshape_target(ctx: &KernelContext<'_>, input: &[usize], target: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let total = numel(ctx, input)?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            -1 => return Err(ctx.err("more than one dimension is -1")),
            0 if !allowzero => {
                let Some(&c) = input.get(i) else {
                    return Err(ctx.err(format!("dimension {i} is 0 (copy) but the input has rank {}", input.len())));
                };
                out.push(c);
            }
            d if d < 0 => return Err(ctx.err(format!("invalid dimension {d}"))),
            d => out.push(usize::try_from(d).map_err(|_| ctx.err(format!("invalid dimension {d}")))?),
        }
    }
    if let Some(i) = infer {
        let known = numel(ctx, &out)?;
        if known == 0 || total % known != 0 {
            return Err(shape_err(ctx, input, &out, "cannot infer the -1 dimension"));
        }
        out[i] = total / known;
    }
    if numel(ctx, &out)? != total {
        return Err(shape_err(ctx, input, &out, "have different element counts"));
    }
    Ok(out)
}

impl Kernel for ShapeOnly {
    /// Data movement: the values are not read.
    fn handles_low_precision(&self) -> bool {
        true
    }

    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let shape = x.shape();
        let rank = shape.len();
        let out = match &self.0 {
            Op::Reshape { shape: attr, allowzero } => {
                let target = match attr {
                    Some(s) => s.clone(),
                    None => int_input(ctx, &ins.tensor(1)?, "shape")?,
                };
                reshape_target(ctx, &shape, &target, *allowzero)?
            }
            Op::Flatten { axis: a } => {
                let a = if *a < 0 { *a + rank as i64 } else { *a };
                if !(0..=rank as i64).contains(&a) {
                    return Err(ctx.err(format!("axis {a} is out of range for rank {rank}")));
                }
                let a = a as usize;
                vec![numel(ctx, &shape[..a])?, numel(ctx, &shape[a..])?]
            }
            Op::Squeeze { axes: attr } => {
                let list = match attr {
                    Some(a) => Some(a.clone()),
                    None => match ins.opt_tensor(1)? {
                        Some(t) => Some(int_input(ctx, &t, "axes")?),
                        None => None,
                    },
                };
                match list {
                    None => shape.iter().copied().filter(|&d| d != 1).collect(),
                    Some(list) => {
                        let ax = axes(ctx, &list, rank)?;
                        if let Some(&a) = ax.iter().find(|&&a| shape[a] != 1) {
                            return Err(ctx.err(format!("cannot squeeze axis {a} of size {}", shape[a])));
                        }
                        shape.iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, &d)| d).collect()
                    }
                }
            }
            Op::Unsqueeze { axes: attr } => {
                let list = match attr {
                    Some(a) => a.clone(),
                    None => int_input(ctx, &ins.tensor(1)?, "axes")?,
                };
                let out_rank = rank + list.len();
                let ax = axes(ctx, &list, out_rank)?;
                let mut src = shape.iter();
                (0..out_rank).map(|i| if ax.contains(&i) { 1 } else { src.next().copied().unwrap_or(1) }).collect()
            }
        };
        one(reshape(x, &out))
    }
}

/// Reshape that skips the no-op case.
pub fn reshape(x: Tensor, shape: &[usize]) -> Tensor {
    if x.shape() == shape { x } else { x.reshape(shape) }
}
