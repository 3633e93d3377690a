//! TopK: the k largest (or smallest) entries along an axis, with their int64 indices; ties go to
//! the lower index.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::axes::axis;
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::tensor::{IntDType, Slice};
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("TopK", 1, build);
}

struct TopK {
    /// `k` from the attribute (opset < 10); from input 1 otherwise.
    attr_k: Option<i64>,
    axis: i64,
    largest: bool,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let attr_k = if node.opset < 10 { Some(node.int("k", -1)?) } else { None };
    Ok(Box::new(TopK { attr_k, axis: node.int("axis", -1)?, largest: node.int("largest", 1)? != 0 }))
}

impl Kernel for TopK {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let x = ins.tensor(0)?;
        let k = match self.attr_k {
            Some(k) => k,
            None => match ins.ints(1)?.as_deref() {
                Some([k]) => *k,
                _ => return Err(ctx.err("K must be a tensor of one element")),
            },
        };
        if x.rank() == 0 {
            return Err(ctx.err("input must have rank >= 1"));
        }
        let a = axis(ctx, self.axis, x.rank())?;
        let n = x.shape()[a];
        if k < 0 || k as usize > n {
            return Err(ctx.err(format!("k = {k} is out of range for axis of size {n}")));
        }
        let desc = self.largest;
        let (vals, idx) = match x.kind() {
            Kind::Float => Dispatch::float_sort_with_indices(x.into_dispatch(), a, desc, IntDType::I64),
            Kind::Int => Dispatch::int_sort_with_indices(x.into_dispatch(), a, desc),
            Kind::Bool => return Err(ctx.err("boolean inputs are not supported")),
        };
        let mut slices: Vec<Slice> = (0..idx_rank(&vals)).map(|_| Slice::new(0, None, 1)).collect();
        slices[a] = Slice::new(0, Some(k as isize), 1);
        let vals = Tensor::from_dispatch(vals).slice(&slices);
        let idx = Tensor::from_dispatch(idx).cast(DataType::Int64)?.slice(&slices);
        Ok(vec![Some(vals.into()), Some(idx.into())])
    }
}

fn idx_rank(t: &burn::backend::DispatchTensor) -> usize {
    use burn::backend::TensorMetadata;
    t.shape().num_dims()
}
