//! EyeLike: a 2-D tensor with ones on the `k`-th diagonal, shaped like the input, in the `dtype`
//! attribute's type (default: the input's).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{HostValues, host_tensor, one};
use crate::registry::OpRegistry;
use crate::value::Value;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("EyeLike", 9, build);
}

struct EyeLike {
    dtype: Option<DataType>,
    k: i64,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let dtype = if node.has("dtype") {
        let code = node.int("dtype", 0)?;
        let dt = i32::try_from(code).ok().and_then(DataType::from_onnx_code);
        Some(dt.ok_or_else(|| node.err(format!("unknown dtype {code}")))?)
    } else {
        None
    };
    Ok(Box::new(EyeLike { dtype, k: node.int("k", 0)? }))
}

impl Kernel for EyeLike {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let s = x.shape();
        let [n, m] = s[..] else {
            return Err(ctx.err(format!("input must have rank 2, not {}", s.len())));
        };
        let dtype = self.dtype.unwrap_or(x.dtype());
        let v: Vec<i64> = (0..n * m).map(|p| i64::from((p % m) as i64 - (p / m) as i64 == self.k)).collect();
        one(host_tensor(&s, HostValues::I64(v), dtype, ctx.device)?)
    }
}
