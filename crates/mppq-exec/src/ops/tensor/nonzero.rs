//! NonZero: the int64 coordinates `[rank, nnz]` of the non-zero elements, in row-major order.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::{one, strides};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("NonZero", 9, build);
}

struct NonZero;

fn build(_node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(NonZero))
}

impl Kernel for NonZero {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let s = x.shape();
        let st = strides(&s);
        let hits: Vec<usize> = x.to_f64_vec().iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(i, _)| i).collect();
        let nnz = hits.len();
        let mut coords = vec![0i64; s.len() * nnz];
        for (n, &flat) in hits.iter().enumerate() {
            for (d, (&dim, &stride)) in s.iter().zip(&st).enumerate() {
                coords[d * nnz + n] = ((flat / stride) % dim) as i64;
            }
        }
        one(Tensor::from_i64(&[s.len(), nnz], coords, ctx.device))
    }
}
