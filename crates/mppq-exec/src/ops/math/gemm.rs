//! Gemm: `alpha * A' @ B' + beta * C` with transA/transB and an optional C broadcast to [M, N].

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{float_tensor, shape_err};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, broadcast_shapes};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Gemm", 1, build);
}

struct Gemm {
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Gemm {
        alpha: node.float("alpha", 1.0)?,
        beta: node.float("beta", 1.0)?,
        trans_a: node.int("transA", 0)? != 0,
        trans_b: node.int("transB", 0)? != 0,
    }))
}

impl Kernel for Gemm {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let a = float_tensor(ctx, ins.tensor(0)?, "A")?;
        let b = float_tensor(ctx, ins.tensor(1)?, "B")?;
        let c = ins.opt_tensor(2)?;
        let (sa, sb) = (a.shape(), b.shape());
        if sa.len() != 2 || sb.len() != 2 || a.dtype() != b.dtype() {
            return Err(shape_err(ctx, sa, sb, "A and B must be matrices of one float type"));
        }
        let (m, k) = if self.trans_a { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
        let (k2, n) = if self.trans_b { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
        if k != k2 {
            return Err(shape_err(ctx, sa, sb, "inner dimensions differ"));
        }
        crate::ops::util::layer::check_output_size(ctx, &[m, n])?;
        let mut x = a.into_dispatch();
        if self.trans_a {
            x = Dispatch::float_transpose(x);
        }
        let mut w = b.into_dispatch();
        if self.trans_b {
            w = Dispatch::float_transpose(w);
        }
        let mut y = Dispatch::float_matmul(x, w);
        if self.alpha != 1.0 {
            y = Dispatch::float_mul_scalar(y, self.alpha.into());
        }
        if let Some(c) = c {
            let c = float_tensor(ctx, c, "C")?;
            let sc = c.shape();
            if broadcast_shapes(&sc, &[m, n]).as_deref() != Some(&[m, n][..])
                || c.dtype() != Tensor::from_dispatch(y.clone()).dtype()
            {
                return Err(shape_err(ctx, sc, vec![m, n], "C does not broadcast to the output"));
            }
            if self.beta != 0.0 {
                let mut lifted = vec![1; 2 - sc.len()];
                lifted.extend_from_slice(&sc);
                let mut cd = c.reshape(&lifted).into_dispatch();
                if self.beta != 1.0 {
                    cd = Dispatch::float_mul_scalar(cd, self.beta.into());
                }
                y = Dispatch::float_add(y, cd);
            }
        }
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
