//! HannWindow, HammingWindow and BlackmanWindow: one kernel computing a generalized cosine
//! window `sum_k (-1)^k a_k cos(2 pi k n / N)` on the host (periodic: N = size, symmetric:
//! N = size - 1), output in `output_datatype`.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host;
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, burn_dtype};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Shape;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    for op in ["HannWindow", "HammingWindow", "BlackmanWindow"] {
        r.register_fn(op, 17, build);
    }
}

struct Window {
    coeffs: Vec<f64>,
    periodic: bool,
    out: DataType,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let coeffs = match node.op.op_type.as_str() {
        "HannWindow" => vec![0.5, 0.5],
        "HammingWindow" => vec![25.0 / 46.0, 1.0 - 25.0 / 46.0],
        _ => vec![0.42, 0.5, 0.08],
    };
    let code = node.int("output_datatype", 1)?;
    let out = i32::try_from(code)
        .ok()
        .and_then(DataType::from_onnx_code)
        .filter(|d| burn_dtype(*d).is_some() && *d != DataType::Bool)
        .ok_or_else(|| node.err(format!("unsupported output_datatype {code}")))?;
    Ok(Box::new(Window { coeffs, periodic: node.int("periodic", 1)? != 0, out }))
}

impl Kernel for Window {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let size = match ins.ints(0)?.as_deref() {
            Some([s]) => *s,
            _ => return Err(ctx.err("size must be a scalar")),
        };
        if size < 0 {
            return Err(ctx.err(format!("size {size} is negative")));
        }
        let n = usize::try_from(size).map_err(|_| ctx.err("size is too large"))?;
        host::check_size(ctx, &[n])?;
        let denom = if self.periodic { size as f64 } else { (size - 1) as f64 };
        let values: Vec<f64> = (0..n)
            .map(|i| {
                if denom <= 0.0 {
                    return 1.0;
                }
                let x = 2.0 * std::f64::consts::PI * i as f64 / denom;
                self.coeffs
                    .iter()
                    .enumerate()
                    .map(|(k, a)| if k % 2 == 0 { 1.0 } else { -1.0 } * a * (k as f64 * x).cos())
                    .sum()
            })
            .collect();
        let data = burn::tensor::TensorData::new(values, Shape::from(vec![n]));
        let t = Tensor::from_dispatch(Dispatch::float_from_data(data, ctx.device.dispatch()));
        Ok(vec![Some(t.cast(self.out)?.into())])
    }
}
