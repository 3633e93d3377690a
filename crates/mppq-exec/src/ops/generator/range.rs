//! Range: `start, start + delta, ..` below `limit`, in the inputs' type (integers computed
//! exactly in int64, floats in f64).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{HostValues, host_tensor, one, scalar_f64, scalar_i64};
use crate::registry::OpRegistry;
use crate::tensor::Kind;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Range", 11, build);
}

struct Range;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Range))
}

/// Largest output we agree to build (guards against absurd deltas).
const MAX_LEN: f64 = (1u64 << 31) as f64;

impl Kernel for Range {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (s, l, d) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        let dtype = s.dtype();
        if l.dtype() != dtype || d.dtype() != dtype {
            return Err(ctx.err("start, limit and delta must have one type"));
        }
        if s.numel() != 1 || l.numel() != 1 || d.numel() != 1 {
            return Err(ctx.err("start, limit and delta must be scalars"));
        }
        let values = match s.kind() {
            Kind::Int => {
                let (a, b, st) =
                    (scalar_i64(ctx, &s, "start")?, scalar_i64(ctx, &l, "limit")?, scalar_i64(ctx, &d, "delta")?);
                if st == 0 {
                    return Err(ctx.err("delta must not be 0"));
                }
                let span = i128::from(b) - i128::from(a);
                let n = if (span > 0) == (st > 0) && span != 0 {
                    (span.abs() + i128::from(st).abs() - 1) / i128::from(st).abs()
                } else {
                    0
                };
                if n as f64 > MAX_LEN {
                    return Err(ctx.err(format!("range of {n} elements is too long")));
                }
                crate::budget::check(&[n as usize], 8).map_err(|m| ctx.err(m))?;
                HostValues::I64((0..n as i64).map(|i| a + i * st).collect())
            }
            Kind::Float => {
                let (a, b, st) =
                    (scalar_f64(ctx, &s, "start")?, scalar_f64(ctx, &l, "limit")?, scalar_f64(ctx, &d, "delta")?);
                let n = ((b - a) / st).ceil();
                if n.is_infinite() || n > MAX_LEN {
                    return Err(ctx.err("range is too long"));
                }
                let n = if n.is_nan() || n < 0.0 { 0 } else { n as usize };
                crate::budget::check(&[n], 8).map_err(|m| ctx.err(m))?;
                HostValues::F64((0..n).map(|i| a + i as f64 * st).collect())
            }
            Kind::Bool => return Err(ctx.err("boolean ranges are not allowed")),
        };
        let n = match &values {
            HostValues::I64(v) => v.len(),
            HostValues::F64(v) => v.len(),
        };
        one(host_tensor(&[n], values, dtype, ctx.device)?)
    }
}
