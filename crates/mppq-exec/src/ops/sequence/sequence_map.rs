//! SequenceMap: runs the `body` sub-graph once per element of the input sequence(s) (tensor
//! inputs are passed whole to every run) and collects each body output into a sequence.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{Body, body};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("SequenceMap", 17, build);
}

struct SequenceMap {
    body: Body,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let body = body(node, "body")?;
    let n = node.op.inputs().len();
    if body.inputs.len() != n {
        return Err(node.err(format!("the body takes {} inputs, the node has {n}", body.inputs.len())));
    }
    if body.outputs.len() != node.op.outputs().len() {
        return Err(node.err(format!(
            "the body has {} outputs, the node {}",
            body.outputs.len(),
            node.op.outputs().len()
        )));
    }
    Ok(Box::new(SequenceMap { body }))
}

impl Kernel for SequenceMap {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let values = inputs
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v @ (Value::Tensor(_) | Value::Sequence(_))) => Ok(v),
                Some(Value::Optional(_)) => Err(ctx.err(format!("input {i} must be a tensor or a sequence"))),
                None => Err(ctx.err(format!("input {i} is required"))),
            })
            .collect::<Result<Vec<_>>>()?;
        let len = match values.first() {
            Some(Value::Sequence(s)) => s.len(),
            _ => return Err(ctx.err("input 0 must be a sequence")),
        };
        for (i, v) in values.iter().enumerate() {
            if let Value::Sequence(s) = v
                && s.len() != len
            {
                return Err(ctx.err(format!("input {i} has {} elements, input 0 has {len}", s.len())));
            }
        }
        let mut outs: Vec<Vec<_>> = vec![Vec::with_capacity(len); self.body.outputs.len()];
        for k in 0..len {
            let feeds: Vec<(String, Value)> = self
                .body
                .inputs
                .iter()
                .zip(&values)
                .map(|(name, v)| {
                    let item = match v {
                        Value::Sequence(s) => Value::Tensor(s[k].clone()),
                        other => other.clone(),
                    };
                    (name.clone(), item)
                })
                .collect();
            let out = self.body.exec.run_scoped(feeds, &self.body.outputs, ctx.captured, &mut [])?;
            for (j, (_, v)) in out.into_iter().enumerate() {
                let t = v.into_tensor().ok_or_else(|| ctx.err(format!("body output {j} must be a tensor")))?;
                outs[j].push(t);
            }
        }
        Ok(outs.into_iter().map(|s| Some(Value::Sequence(s))).collect())
    }
}
