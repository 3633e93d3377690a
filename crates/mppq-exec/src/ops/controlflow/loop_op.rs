//! Loop: runs the `body` sub-graph while the trip count and the condition allow, threading the
//! loop-carried values and stacking the scan outputs along a new first axis.

use crate::engine::Executor;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::tensor::Tensor;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("Loop", 1, build);
}

struct Loop {
    body: Executor,
    /// Body input names: iteration number, condition, then the loop-carried values.
    inputs: Vec<String>,
    /// Body output names: condition, loop-carried values, then scan outputs.
    outputs: Vec<String>,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let attr = node.op.attr("body").ok_or_else(|| node.err("missing attribute `body`"))?;
    let graph = attr.as_graph("body").map_err(|e| node.err(e.to_string()))?;
    let inputs: Vec<String> = graph.inputs().iter().map(|v| graph.var_name(*v).to_string()).collect();
    let outputs: Vec<String> = graph.outputs().iter().map(|v| graph.var_name(*v).to_string()).collect();
    let carried = node.op.inputs().len().saturating_sub(2);
    if inputs.len() != carried + 2 {
        return Err(node.err(format!(
            "the body takes {} inputs, expected {} (iteration, condition, {carried} carried)",
            inputs.len(),
            carried + 2
        )));
    }
    if outputs.len() < carried + 1 {
        return Err(node.err(format!("the body has {} outputs, expected at least {}", outputs.len(), carried + 1)));
    }
    let opset = node.opset;
    let body = Executor::new(graph, node.registry, node.device, &|_| opset)?;
    Ok(Box::new(Loop { body, inputs, outputs }))
}

fn scalar_of(ctx: &KernelContext<'_>, t: &Tensor, what: &str) -> Result<f64> {
    if t.numel() != 1 {
        return Err(ctx.err(format!("{what} must have one element, not shape {:?}", t.shape())));
    }
    Ok(t.to_f64_vec().first().copied().unwrap_or(0.0))
}

impl Kernel for Loop {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let n_in = inputs.len();
        let mut ins = ctx.inputs(inputs);
        let max_trip = match ins.opt_tensor(0)? {
            Some(t) => {
                if t.numel() != 1 {
                    return Err(ctx.err("M must have one element"));
                }
                Some(t.to_i64_vec().first().copied().unwrap_or(0))
            }
            None => None,
        };
        let mut cond = match ins.opt_tensor(1)? {
            Some(t) => scalar_of(ctx, &t, "cond")? != 0.0,
            None => true,
        };
        let carried_n = self.inputs.len() - 2;
        let mut carried: Vec<Value> = Vec::with_capacity(carried_n);
        for i in 2..n_in.max(2) {
            carried.push(ins.value(i).ok_or_else(|| ctx.err(format!("loop-carried input {i} is required")))?);
        }
        if carried.len() != carried_n {
            return Err(ctx.err(format!("{} loop-carried inputs, the body expects {carried_n}", carried.len())));
        }
        let scan_n = self.outputs.len() - 1 - carried_n;
        let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); scan_n];
        let mut i: i64 = 0;
        let limit = crate::budget::max_loop_iterations();
        // Bytes the scan outputs hold so far: their stack must fit the tensor budget.
        let mut scan_bytes = vec![0u64; scan_n];
        while cond && max_trip.is_none_or(|m| i < m) {
            if i as u64 >= limit {
                return Err(ctx.err(format!(
                    "the loop has run {i} iterations, the most one Loop may run (max_loop_iterations, default {}); \
                     raise it if the model really loops that long",
                    crate::budget::DEFAULT_MAX_LOOP_ITERATIONS
                )));
            }
            let mut feeds: Vec<(String, Value)> = Vec::with_capacity(self.inputs.len());
            feeds.push((self.inputs[0].clone(), Tensor::from_i64(&[], vec![i], ctx.device).into()));
            feeds.push((self.inputs[1].clone(), Tensor::from_bool(&[], vec![cond], ctx.device).into()));
            for (name, v) in self.inputs[2..].iter().zip(carried.drain(..)) {
                feeds.push((name.clone(), v));
            }
            let mut out = ctx.run_subgraph("body", &self.body, feeds, &self.outputs)?.into_iter().map(|(_, v)| v);
            let c = out
                .next()
                .and_then(Value::into_tensor)
                .ok_or_else(|| ctx.err("the body's condition output must be a tensor"))?;
            cond = scalar_of(ctx, &c, "the body's condition")? != 0.0;
            carried.extend(out.by_ref().take(carried_n));
            for (k, v) in out.enumerate() {
                let t = v.into_tensor().ok_or_else(|| ctx.err("scan outputs must be tensors"))?;
                if let Some(first) = scans[k].first()
                    && (first.shape() != t.shape() || first.dtype() != t.dtype())
                {
                    return Err(ctx.err(format!("scan output {k} changes shape or type between iterations")));
                }
                scan_bytes[k] += t.dtype().packed_len(t.numel()).unwrap_or(t.numel()) as u64;
                if scan_bytes[k] > crate::budget::max_tensor_bytes() {
                    return Err(ctx.err(format!(
                        "scan output {k} grows past the {} MiB one tensor may take after {} iterations \
                         (max_tensor_mib / --max-tensor-mib)",
                        crate::budget::max_tensor_bytes() >> 20,
                        i + 1
                    )));
                }
                scans[k].push(t);
            }
            i += 1;
        }
        let mut result: Vec<Option<Value>> = carried.into_iter().map(Some).collect();
        for s in scans {
            let stacked = if s.is_empty() {
                // No iteration ran: the element type and shape are unknown here.
                Tensor::from_f32(&[0], vec![], ctx.device)
            } else {
                let parts: Vec<Tensor> = s
                    .into_iter()
                    .map(|t| {
                        let mut shape = vec![1];
                        shape.extend(t.shape());
                        t.reshape(&shape)
                    })
                    .collect();
                Tensor::cat(parts, 0)
            };
            result.push(Some(stacked.into()));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Executor, OpRegistry, Tensor, Value};
    use mppq_ir::{Attribute, Graph, Operation};

    /// body(i, cond, x): y = x + x; outputs (cond, y, scan y).
    fn body() -> Graph {
        let mut g = Graph::new("body");
        let i = g.ensure_variable("i");
        let c = g.ensure_variable("c");
        let x = g.ensure_variable("x");
        let y = g.ensure_variable("y");
        for v in [i, c, x] {
            g.add_graph_input(v).unwrap();
        }
        g.add_operation(Operation::new("Add", "add").with_opset(13), &[Some(x), Some(x)], &[Some(y)]).unwrap();
        g.add_graph_output(c).unwrap();
        g.add_graph_output(y).unwrap();
        g.add_graph_output(y).unwrap();
        g
    }

    #[test]
    fn loop_threads_carried_values_and_stacks_scans() {
        let mut g = Graph::new("outer");
        let m = g.ensure_variable("M");
        let c = g.ensure_variable("cond");
        let x = g.ensure_variable("x0");
        let (fx, scan) = (g.ensure_variable("x_final"), g.ensure_variable("scan"));
        for v in [m, c, x] {
            g.add_graph_input(v).unwrap();
        }
        let node = Operation::new("Loop", "loop").with_opset(13).with_attr("body", Attribute::Graph(Box::new(body())));
        g.add_operation(node, &[Some(m), Some(c), Some(x)], &[Some(fx), Some(scan)]).unwrap();
        g.add_graph_output(fx).unwrap();
        g.add_graph_output(scan).unwrap();
        let device = Device::cpu();
        let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 13).unwrap();
        let feeds: Vec<(String, Value)> = vec![
            ("M".into(), Tensor::from_i64(&[], vec![3], &device).into()),
            ("cond".into(), Tensor::from_bool(&[], vec![true], &device).into()),
            ("x0".into(), Tensor::from_f32(&[2], vec![1.0, -1.0], &device).into()),
        ];
        let out = exec.run(feeds, &mut []).unwrap();
        assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![8.0, -8.0]);
        let scan = out[1].1.as_tensor().unwrap();
        assert_eq!(scan.shape(), vec![3, 2]);
        assert_eq!(scan.to_f32_vec(), vec![2.0, -2.0, 4.0, -4.0, 8.0, -8.0]);
    }

    #[test]
    fn a_loop_past_the_iteration_limit_is_an_error() {
        let mut g = Graph::new("outer");
        let c = g.ensure_variable("cond");
        let x = g.ensure_variable("x0");
        let (fx, scan) = (g.ensure_variable("x_final"), g.ensure_variable("scan"));
        for v in [c, x] {
            g.add_graph_input(v).unwrap();
        }
        // No trip count and a condition that stays true: the loop never ends by itself.
        let node =
            Operation::new("Loop", "endless").with_opset(13).with_attr("body", Attribute::Graph(Box::new(body())));
        g.add_operation(node, &[None, Some(c), Some(x)], &[Some(fx), Some(scan)]).unwrap();
        g.add_graph_output(fx).unwrap();
        g.add_graph_output(scan).unwrap();
        let device = Device::cpu();
        let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 13).unwrap();
        let feeds = || -> Vec<(String, Value)> {
            vec![
                ("cond".into(), Tensor::from_bool(&[], vec![true], &device).into()),
                ("x0".into(), Tensor::from_f32(&[2], vec![1.0, -1.0], &device).into()),
            ]
        };
        crate::budget::set_max_loop_iterations(20);
        let err = exec.run(feeds(), &mut []).unwrap_err().to_string();
        crate::budget::set_max_loop_iterations(0);
        assert!(
            err.contains("endless") && err.contains("20 iterations") && err.contains("max_loop_iterations"),
            "{err}"
        );
    }
}
