//! If: runs the `then_branch` or `else_branch` sub-graph on a boolean condition; the branches
//! read values of the enclosing scopes by name.

use crate::engine::Executor;
use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::registry::OpRegistry;
use crate::value::Value;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("If", 1, build);
}

struct Branch {
    exec: Executor,
    outputs: Vec<String>,
}

struct If {
    then_branch: Branch,
    else_branch: Branch,
}

fn branch(node: &OpNode<'_>, name: &str) -> Result<Branch> {
    let attr = node.op.attr(name).ok_or_else(|| node.err(format!("missing attribute `{name}`")))?;
    let graph = attr.as_graph(name).map_err(|e| node.err(e.to_string()))?;
    let opset = node.opset;
    let exec = Executor::new(graph, node.registry, node.device, &|_| opset)?;
    let outputs = exec.output_names().iter().map(|s| s.to_string()).collect();
    Ok(Branch { exec, outputs })
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let then_branch = branch(node, "then_branch")?;
    let else_branch = branch(node, "else_branch")?;
    if then_branch.outputs.len() != else_branch.outputs.len() {
        return Err(node.err("the branches have different numbers of outputs"));
    }
    Ok(Box::new(If { then_branch, else_branch }))
}

impl Kernel for If {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let cond = ctx.inputs(inputs).tensor(0)?;
        if cond.numel() != 1 {
            return Err(ctx.err(format!("the condition must have one element, not shape {:?}", cond.shape())));
        }
        let c = cond.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0;
        let (attr, b) = if c { ("then_branch", &self.then_branch) } else { ("else_branch", &self.else_branch) };
        let out = ctx.run_subgraph(attr, &b.exec, vec![], &b.outputs)?;
        Ok(out.into_iter().map(|(_, v)| Some(v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Executor, OpRegistry, Tensor, Value};
    use mppq_ir::{Attribute, Graph, Operation};

    /// A branch that reduces the outer-scope `x` over axis 1 with `op`.
    fn branch(op: &str) -> Graph {
        let mut g = Graph::new(op);
        let x = g.ensure_variable("x");
        let y = g.ensure_variable(&format!("y_{op}"));
        let node = Operation::new(op, op)
            .with_opset(11)
            .with_attr("axes", Attribute::Ints(vec![1]))
            .with_attr("keepdims", Attribute::Int(0));
        g.add_operation(node, &[Some(x)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        g
    }

    #[test]
    fn if_runs_the_chosen_branch_with_captured_values() {
        let mut g = Graph::new("outer");
        let c = g.ensure_variable("cond");
        let x = g.ensure_variable("x");
        let y = g.ensure_variable("y");
        g.add_graph_input(c).unwrap();
        g.add_graph_input(x).unwrap();
        let node = Operation::new("If", "if")
            .with_opset(11)
            .with_attr("then_branch", Attribute::Graph(Box::new(branch("ReduceMax"))))
            .with_attr("else_branch", Attribute::Graph(Box::new(branch("ReduceMin"))));
        g.add_operation(node, &[Some(c)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        let device = Device::cpu();
        let exec = Executor::new(&g, &OpRegistry::builtin(), &device, &|_| 11).unwrap();
        for (flag, want) in [(true, vec![3.0, 6.0]), (false, vec![1.0, 4.0])] {
            let feeds: Vec<(String, Value)> = vec![
                ("cond".into(), Tensor::from_bool(&[], vec![flag], &device).into()),
                ("x".into(), Tensor::from_f32(&[2, 3], vec![1.0, 3.0, 2.0, 6.0, 4.0, 5.0], &device).into()),
            ];
            let out = exec.run(feeds, &mut []).unwrap();
            assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), want);
        }
    }
}

/// Runs real ONNX backend cases of If/Loop whose branches also use Constant and Identity (owned
/// by other families) with minimal stand-ins for those two, so the control flow is checked on
/// real data. Skipped when the test data is not present.
#[cfg(test)]
pub(super) mod backend_stub {
    use crate::error::Result;
    use crate::kernel::{Kernel, KernelContext, OpNode};
    use crate::registry::OpRegistry;
    use crate::{Device, Executor, Tensor, Value};
    use std::path::PathBuf;

    struct Const(Tensor);
    impl Kernel for Const {
        fn run(&self, _: &KernelContext<'_>, _: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
            Ok(vec![Some(self.0.clone().into())])
        }
    }
    fn constant(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
        let a = node.op.attr("value").ok_or_else(|| node.err("value"))?;
        let t = a.as_tensor("value").map_err(|e| node.err(e.to_string()))?;
        Ok(Box::new(Const(Tensor::from_data(t, node.device)?)))
    }
    struct Ident;
    impl Kernel for Ident {
        fn run(&self, _: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
            Ok(inputs)
        }
    }
    fn identity(_: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
        Ok(Box::new(Ident))
    }

    /// `None` when the data is missing or another operator is unsupported; otherwise whether every output matched exactly (or to 1e-6).
    pub fn run_case(name: &str) -> Option<std::result::Result<(), String>> {
        let dir = std::env::var_os("MPPQ_BACKEND_TESTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/onnx-backend-tests"))
            .join("node")
            .join(name);
        if !dir.join("model.onnx").exists() {
            return None;
        }
        let mut reg = OpRegistry::builtin();
        reg.register_fn("Constant", 1, constant);
        reg.register_fn("Identity", 1, identity);
        let model = mppq_onnx::load_model(dir.join("model.onnx")).ok()?;
        let device = Device::cpu();
        let exec = match Executor::new(&model.graph, &reg, &device, &|d| model.opset(d).unwrap_or(0)) {
            Ok(e) => e,
            // Operators of other families not merged yet: nothing to check.
            Err(crate::ExecError::Unsupported { .. }) => return None,
            Err(e) => return Some(Err(e.to_string())),
        };
        let set = dir.join("test_data_set_0");
        let mut feeds = Vec::new();
        for (i, n) in exec.input_names().iter().enumerate() {
            let d = mppq_onnx::decode_tensor_file(set.join(format!("input_{i}.pb"))).ok()?;
            feeds.push((n.to_string(), Value::from(Tensor::from_data(&d, &device).ok()?)));
        }
        let out = match exec.run(feeds, &mut []) {
            Ok(o) => o,
            Err(e) => return Some(Err(e.to_string())),
        };
        for (i, (_, v)) in out.iter().enumerate() {
            let want = mppq_onnx::decode_tensor_file(set.join(format!("output_{i}.pb"))).ok()?;
            let Some(got) = v.as_tensor() else { return Some(Err(format!("output {i} is not a tensor"))) };
            let want_t = Tensor::from_data(&want, &device).ok()?;
            if got.shape() != want_t.shape() || got.dtype() != want_t.dtype() {
                return Some(Err(format!(
                    "output {i}: {:?} {} vs {:?} {}",
                    got.shape(),
                    got.dtype(),
                    want_t.shape(),
                    want_t.dtype()
                )));
            }
            let close =
                got.to_f64_vec().iter().zip(want_t.to_f64_vec()).all(|(a, b)| (a - b).abs() <= 1e-6 * (1.0 + b.abs()));
            if !close {
                return Some(Err(format!("output {i} differs")));
            }
        }
        Some(Ok(()))
    }

    #[test]
    fn backend_if_with_stand_ins() {
        if let Some(r) = run_case("test_if") {
            r.unwrap();
        }
    }

    #[test]
    fn backend_loop11_with_stand_ins() {
        if let Some(r) = run_case("test_loop11") {
            r.unwrap();
        }
    }
}
