//! Constant: a tensor from the `value`, `value_float(s)` or `value_int(s)` attribute, uploaded
//! once when the node is built (`value_string(s)` and `sparse_value` are not supported).

use crate::error::{ExecError, Result};
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::indexing::one;
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Constant", 1, build);
}

struct Constant(Tensor);

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let dev = node.device;
    let t = if let Some(a) = node.op.attr("value") {
        let data = a.as_tensor("value").map_err(|e| node.err(e.to_string()))?;
        Tensor::from_data(data, dev).map_err(|e| ExecError::Unsupported {
            op_type: node.op.op_type.clone(),
            domain: "ai.onnx".into(),
            opset: node.opset,
            node: node.label().to_string(),
            hint: format!(" ({e})"),
        })?
    } else if node.has("value_float") {
        Tensor::from_f32(&[], vec![node.float("value_float", 0.0)?], dev)
    } else if let Some(v) = node.floats("value_floats")? {
        Tensor::from_f32(&[v.len()], v, dev)
    } else if node.has("value_int") {
        Tensor::from_i64(&[], vec![node.int("value_int", 0)?], dev)
    } else if let Some(v) = node.ints("value_ints")? {
        Tensor::from_i64(&[v.len()], v, dev)
    } else {
        return Err(ExecError::Unsupported {
            op_type: node.op.op_type.clone(),
            domain: "ai.onnx".into(),
            opset: node.opset,
            node: node.label().to_string(),
            hint: " (only value, value_float(s) and value_int(s) are supported)".into(),
        });
    };
    Ok(Box::new(Constant(t)))
}

impl Kernel for Constant {
    fn run(&self, _ctx: &KernelContext<'_>, _inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        one(self.0.clone())
    }
}
