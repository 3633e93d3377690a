//! Det: determinant of each trailing square matrix `[*, M, M] -> [*]`, by LU decomposition with
//! partial pivoting in float64 on the host (matrices are small; one pass per matrix).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host::{float_from_f64, one, require_float};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Det", 11, build);
}

struct Det;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(Det))
}

fn det(mut a: Vec<f64>, m: usize) -> f64 {
    let mut d = 1.0;
    for c in 0..m {
        let p = (c..m).max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs())).unwrap_or(c);
        if a[p * m + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..m {
                a.swap(p * m + k, c * m + k);
            }
            d = -d;
        }
        let pivot = a[c * m + c];
        d *= pivot;
        for i in c + 1..m {
            let f = a[i * m + c] / pivot;
            for k in c..m {
                a[i * m + k] -= f * a[c * m + k];
            }
        }
    }
    d
}

impl Kernel for Det {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        require_float(ctx, &x, "input")?;
        let s = x.shape();
        let r = s.len();
        if r < 2 || s[r - 1] != s[r - 2] {
            return Err(ctx.err(format!("input must be [*, M, M], got {s:?}")));
        }
        let m = s[r - 1];
        let v = x.to_f64_vec();
        let out_shape = s[..r - 2].to_vec();
        let n: usize = out_shape.iter().product();
        let dets: Vec<f64> = (0..n).map(|b| det(v[b * m * m..(b + 1) * m * m].to_vec(), m)).collect();
        one(float_from_f64(&out_shape, dets, x.burn_dtype(), ctx))
    }
}
