//! Scan: runs the `body` sub-graph once per position along the scan axes of the scan inputs,
//! threading state values and stacking the per-iteration scan outputs. Opset 8 has a leading
//! batch axis on every input and output (scan axis 1, `directions`); opset 9 on drops it and
//! adds `scan_input_axes`/`scan_input_directions`/`scan_output_axes`/`scan_output_directions`.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::sequence::{Body, body, stack, take};
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, normalize_axis};
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Scan", 8, build);
    r.register_fn("Scan", 9, build);
}

struct Scan {
    body: Body,
    /// Opset 8: a leading batch axis and a `sequence_lens` first input.
    batched: bool,
    n_state: usize,
    n_scan_in: usize,
    in_axes: Vec<i64>,
    in_reverse: Vec<bool>,
    out_axes: Vec<i64>,
    out_reverse: Vec<bool>,
}

fn directions(node: &OpNode<'_>, name: &str, n: usize) -> Result<Vec<bool>> {
    match node.ints(name)? {
        None => Ok(vec![false; n]),
        Some(v) if v.len() == n => v
            .into_iter()
            .map(|d| match d {
                0 => Ok(false),
                1 => Ok(true),
                d => Err(node.err(format!("`{name}` entries must be 0 or 1, not {d}"))),
            })
            .collect(),
        Some(v) => Err(node.err(format!("`{name}` has {} entries, expected {n}", v.len()))),
    }
}

fn axes(node: &OpNode<'_>, name: &str, n: usize) -> Result<Vec<i64>> {
    match node.ints(name)? {
        None => Ok(vec![0; n]),
        Some(v) if v.len() == n => Ok(v),
        Some(v) => Err(node.err(format!("`{name}` has {} entries, expected {n}", v.len()))),
    }
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let body = body(node, "body")?;
    let batched = node.opset < 9;
    let n_scan_in = usize::try_from(node.int("num_scan_inputs", -1)?)
        .map_err(|_| node.err("missing or negative `num_scan_inputs`"))?;
    let n_in = node.op.inputs().len().saturating_sub(usize::from(batched));
    let n_state = n_in
        .checked_sub(n_scan_in)
        .ok_or_else(|| node.err(format!("{n_scan_in} scan inputs but only {n_in} inputs")))?;
    if body.inputs.len() != n_in {
        return Err(node.err(format!("the body takes {} inputs, expected {n_in}", body.inputs.len())));
    }
    let n_scan_out =
        body.outputs.len().checked_sub(n_state).ok_or_else(|| node.err("the body has fewer outputs than states"))?;
    if node.op.outputs().len() > n_state + n_scan_out {
        return Err(node.err(format!(
            "the node has {} outputs, the body {}",
            node.op.outputs().len(),
            n_state + n_scan_out
        )));
    }
    let (in_axes, in_reverse, out_axes, out_reverse) = if batched {
        (vec![0; n_scan_in], directions(node, "directions", n_scan_in)?, vec![0; n_scan_out], vec![false; n_scan_out])
    } else {
        (
            axes(node, "scan_input_axes", n_scan_in)?,
            directions(node, "scan_input_directions", n_scan_in)?,
            axes(node, "scan_output_axes", n_scan_out)?,
            directions(node, "scan_output_directions", n_scan_out)?,
        )
    };
    Ok(Box::new(Scan { body, batched, n_state, n_scan_in, in_axes, in_reverse, out_axes, out_reverse }))
}

impl Scan {
    /// One unbatched scan: returns the final states then the stacked scan outputs.
    fn scan(&self, ctx: &KernelContext<'_>, states: Vec<Value>, scans: Vec<Tensor>) -> Result<Vec<Value>> {
        let mut axes = Vec::with_capacity(scans.len());
        let mut len = None;
        for (j, t) in scans.iter().enumerate() {
            let rank = t.rank();
            let axis = normalize_axis(self.in_axes[j], rank).filter(|_| rank > 0).ok_or_else(|| {
                ctx.err(format!("scan input axis {} is out of range for rank {rank}", self.in_axes[j]))
            })?;
            let n = t.shape()[axis];
            if *len.get_or_insert(n) != n {
                return Err(ctx.err(format!(
                    "scan input {j} has {n} entries along its scan axis, another has {}",
                    len.unwrap_or(0)
                )));
            }
            axes.push(axis);
        }
        let len = len.unwrap_or(0);
        // ONNX Runtime refuses a body that changes a state's shape; it ran here.
        let state_shapes: Vec<Option<Vec<usize>>> = states.iter().map(|v| v.as_tensor().map(Tensor::shape)).collect();
        let mut states = states;
        let n_scan_out = self.out_axes.len();
        let mut outs: Vec<Vec<Tensor>> = vec![Vec::with_capacity(len); n_scan_out];
        for i in 0..len {
            let mut feeds: Vec<(String, Value)> = Vec::with_capacity(self.body.inputs.len());
            let names = &self.body.inputs;
            feeds.extend(names.iter().zip(states.drain(..)).map(|(n, v)| (n.clone(), v)));
            for (j, t) in scans.iter().enumerate() {
                let at = if self.in_reverse[j] { len - 1 - i } else { i };
                feeds.push((names[self.n_state + j].clone(), Value::Tensor(take(t.clone(), axes[j], at))));
            }
            let mut out =
                ctx.run_subgraph("body", &self.body.exec, feeds, &self.body.outputs)?.into_iter().map(|(_, v)| v);
            states.extend(out.by_ref().take(self.n_state));
            for (k, (state, before)) in states.iter().zip(&state_shapes).enumerate() {
                let now = state.as_tensor().map(Tensor::shape);
                if before.is_some() && now != *before {
                    return Err(ctx.err(format!(
                        "iteration {i} changed state {k} from shape {:?} to {:?}: a Scan's states keep their shape",
                        before.clone().unwrap_or_default(),
                        now.unwrap_or_default()
                    )));
                }
            }
            for (k, v) in out.enumerate() {
                outs[k].push(v.into_tensor().ok_or_else(|| ctx.err(format!("scan output {k} must be a tensor")))?);
            }
        }
        let mut result = states;
        for (k, mut parts) in outs.into_iter().enumerate() {
            if parts.is_empty() {
                return Err(ctx.not_implemented("a scan over zero iterations (scan output shapes unknown)"));
            }
            if self.out_reverse[k] {
                parts.reverse();
            }
            let rank = parts[0].rank() + 1;
            let axis = normalize_axis(self.out_axes[k], rank).ok_or_else(|| {
                ctx.err(format!("scan output axis {} is out of range for rank {rank}", self.out_axes[k]))
            })?;
            result.push(Value::Tensor(stack(ctx, parts, axis, &format!("scan output {k}"))?));
        }
        Ok(result)
    }
}

impl Kernel for Scan {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let n_out = self.n_state + self.out_axes.len();
        let mut ins = ctx.inputs(inputs);
        let skip = usize::from(self.batched);
        let seq_lens = if self.batched { ins.opt_tensor(0)? } else { None };
        let mut states = Vec::with_capacity(self.n_state);
        for i in 0..self.n_state {
            states.push(ins.value(skip + i).ok_or_else(|| ctx.err(format!("state input {} is required", skip + i)))?);
        }
        let mut scans = Vec::with_capacity(self.n_scan_in);
        for j in 0..self.n_scan_in {
            scans.push(ins.tensor(skip + self.n_state + j)?);
        }
        if !self.batched {
            return Ok(self.scan(ctx, states, scans)?.into_iter().map(Some).collect());
        }
        // Opset 8: run each batch entry separately and stack the results along axis 0.
        let states: Vec<Tensor> = states
            .into_iter()
            .map(|v| v.into_tensor().ok_or_else(|| ctx.err("opset-8 Scan states must be tensors")))
            .collect::<Result<_>>()?;
        let batch = states.iter().chain(&scans).map(|t| t.shape().first().copied()).next().flatten().unwrap_or(0);
        if let Some(bad) = states.iter().chain(&scans).find(|t| t.shape().first() != Some(&batch)) {
            return Err(ctx.err(format!(
                "every input needs the batch size {batch} as its first dimension, not shape {:?}",
                bad.shape()
            )));
        }
        if let Some(lens) = seq_lens {
            // Only full-length sequences are supported: every entry must be the scan length.
            let full = scans.first().and_then(|t| t.shape().get(1).copied()).unwrap_or(0) as i64;
            if lens.to_i64_vec().iter().any(|&l| l != full) {
                return Err(ctx.not_implemented("opset-8 Scan with sequence_lens shorter than the scan length"));
            }
        }
        let mut per_out: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); n_out];
        for b in 0..batch {
            let st = states.iter().map(|t| Value::Tensor(take(t.clone(), 0, b))).collect();
            let sc = scans.iter().map(|t| take(t.clone(), 0, b)).collect();
            for (k, v) in self.scan(ctx, st, sc)?.into_iter().enumerate() {
                per_out[k].push(v.into_tensor().ok_or_else(|| ctx.err("opset-8 Scan outputs must be tensors"))?);
            }
        }
        per_out
            .into_iter()
            .enumerate()
            .map(|(k, parts)| Ok(Some(Value::Tensor(stack(ctx, parts, 0, &format!("output {k}"))?))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Executor, OpRegistry, Tensor, Value};
    use mppq_ir::{Attribute, Graph, Operation};

    /// A Scan whose body grows its state (s' = Concat(s, x)) is refused naming the node, as ONNX
    /// Runtime refuses it; it ran.
    #[test]
    fn a_state_that_changes_shape_is_an_error() {
        let mut body = Graph::new("body");
        let (s, x, s2, y) = (
            body.ensure_variable("s"),
            body.ensure_variable("x"),
            body.ensure_variable("s2"),
            body.ensure_variable("y"),
        );
        body.add_graph_input(s).unwrap();
        body.add_graph_input(x).unwrap();
        let concat = Operation::new("Concat", "grow").with_opset(13).with_attr("axis", Attribute::Int(0));
        body.add_operation(concat, &[Some(s), Some(x)], &[Some(s2)]).unwrap();
        body.add_operation(Operation::new("Identity", "id").with_opset(13), &[Some(x)], &[Some(y)]).unwrap();
        body.add_graph_output(s2).unwrap();
        body.add_graph_output(y).unwrap();
        let mut g = Graph::new("outer");
        let (s0, xs, sf, ys) =
            (g.ensure_variable("s0"), g.ensure_variable("xs"), g.ensure_variable("s_final"), g.ensure_variable("ys"));
        g.add_graph_input(s0).unwrap();
        g.add_graph_input(xs).unwrap();
        let scan = Operation::new("Scan", "scan")
            .with_opset(16)
            .with_attr("body", Attribute::Graph(Box::new(body)))
            .with_attr("num_scan_inputs", Attribute::Int(1));
        g.add_operation(scan, &[Some(s0), Some(xs)], &[Some(sf), Some(ys)]).unwrap();
        g.add_graph_output(sf).unwrap();
        g.add_graph_output(ys).unwrap();
        let device = Device::cpu();
        let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 16).unwrap();
        let feeds: Vec<(String, Value)> = vec![
            ("s0".into(), Tensor::from_f32(&[1], vec![0.0], &device).into()),
            ("xs".into(), Tensor::from_f32(&[3, 1], vec![1.0, 2.0, 3.0], &device).into()),
        ];
        let err = exec.run(feeds, &mut []).unwrap_err().to_string();
        assert!(err.contains("scan") && err.contains("changed state 0 from shape [1] to [2]"), "{err}");
    }
}
