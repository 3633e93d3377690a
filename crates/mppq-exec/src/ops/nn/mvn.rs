//! MeanVarianceNormalization: `(x - mean) / (sqrt(var) + 1e-9)` over `axes` (default 0, 2, 3).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::layer::{self, float_tensor, moments};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, normalize_axis};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MeanVarianceNormalization", 1, build);
}

struct Mvn {
    axes: Vec<i64>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let axes = if layer::opset(node) < 9 && node.has("across_channels") {
        if node.int("across_channels", 0)? != 0 { vec![0, 1, 2, 3] } else { vec![0, 2, 3] }
    } else {
        node.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3])
    };
    Ok(Box::new(Mvn { axes }))
}

impl Kernel for Mvn {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let x = float_tensor(ctx, ctx.inputs(inputs).tensor(0)?, "X")?;
        let rank = x.rank();
        let mut axes = Vec::new();
        for &a in &self.axes {
            match normalize_axis(a, rank).filter(|_| rank > 0) {
                Some(a) if !axes.contains(&a) => axes.push(a),
                _ => return Err(ctx.err(format!("axes {:?} are invalid for rank {rank}", self.axes))),
            }
        }
        let xd = x.into_dispatch();
        let (mean, var) = moments(xd.clone(), &axes);
        let std = Dispatch::float_add_scalar(Dispatch::float_sqrt(var), 1e-9f64.into());
        let y = Dispatch::float_div(Dispatch::float_sub(xd, mean), std);
        Ok(vec![Some(Tensor::from_dispatch(y).into())])
    }
}
