//! Engine behaviour on small hand-built graphs: whole and partial runs, hooks with quantization
//! configs (inputs *and* outputs get fake-quantized), and typed errors for unsupported operators,
//! shape mismatches and missing feeds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_exec::hooks::OpInfo;
use mppq_exec::{Device, ExecError, ExecHook, Executor, IdentityFakeQuant, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::quant::{OperationQuantConfig, QuantizationState, TensorQuantConfig};
use mppq_ir::{Graph, Operation, TensorData};

/// x → Relu → y → Add(y, c) → z, and a side branch y → Neg → w.
fn graph() -> Graph {
    let mut g = Graph::new("g");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let c = g.add_initializer("c", TensorData::from_vec(vec![3], &[1.0f32, 2.0, 3.0]).unwrap()).unwrap();
    let y = g.ensure_variable("y");
    let z = g.ensure_variable("z");
    let w = g.ensure_variable("w");
    g.add_operation(Operation::new("Relu", "relu").with_opset(17), &[Some(x)], &[Some(y)]).unwrap();
    g.add_operation(Operation::new("Add", "add").with_opset(17), &[Some(y), Some(c)], &[Some(z)]).unwrap();
    g.add_operation(Operation::new("Neg", "neg").with_opset(17), &[Some(y)], &[Some(w)]).unwrap();
    g.add_graph_output(z).unwrap();
    g.add_graph_output(w).unwrap();
    g
}

fn prepare(g: &Graph) -> (Executor, Device) {
    let device = Device::cpu();
    let exec = Executor::new(g, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    (exec, device)
}

fn feed(device: &Device, values: &[f32], shape: &[usize]) -> Vec<(String, Value)> {
    vec![("x".into(), Tensor::from_f32(shape, values.to_vec(), device).into())]
}

#[test]
fn runs_whole_graph_with_broadcasting() {
    let g = graph();
    let (exec, device) = prepare(&g);
    let out = exec.run(feed(&device, &[-1.0, 0.5, 2.0, -3.0, 4.0, 1.0], &[2, 3]), &mut []).unwrap();
    assert_eq!(out[0].0, "z");
    let z = out[0].1.as_tensor().unwrap();
    assert_eq!(z.shape(), vec![2, 3]);
    assert_eq!(z.to_f32_vec(), vec![1.0, 2.5, 5.0, 1.0, 6.0, 4.0]);
    assert_eq!(out[1].1.as_tensor().unwrap().to_f32_vec(), vec![-0.0, -0.5, -2.0, -0.0, -4.0, -1.0]);
}

struct Counter(Vec<String>);
impl ExecHook for Counter {
    fn before_op(&mut self, op: &OpInfo<'_>, _inputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        self.0.push(op.name.to_string());
        Ok(())
    }
}

#[test]
fn partial_run_executes_only_what_is_needed() {
    let g = graph();
    let (exec, device) = prepare(&g);
    let mut counter = Counter(Vec::new());
    let out = exec.run_until(feed(&device, &[1.0, -2.0, 3.0], &[3]), &["w".to_string()], &mut [&mut counter]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![-1.0, -0.0, -3.0]);
    assert_eq!(counter.0, vec!["relu", "neg"]);
    // An intermediate can be asked for too.
    let out = exec.run_until(feed(&device, &[1.0, -2.0, 3.0], &[3]), &["y".to_string()], &mut []).unwrap();
    assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![1.0, 0.0, 3.0]);
}

#[test]
fn quant_simulation_hooks_inputs_and_outputs() {
    let mut g = graph();
    let mut active = TensorQuantConfig::linear(8, true, None).unwrap();
    active.state = QuantizationState::Activated;
    active.scale = vec![0.1];
    active.offset = vec![0.0];
    let add = g.op_id("add").unwrap();
    g.operation_mut(add).unwrap().quant_config = Some(OperationQuantConfig {
        input_configs: vec![Some(active.clone()), Some(active.clone())],
        output_configs: vec![Some(active.clone())],
    });
    // An initial (uncalibrated) config must not be applied.
    let neg = g.op_id("neg").unwrap();
    g.operation_mut(neg).unwrap().quant_config = Some(OperationQuantConfig {
        input_configs: vec![Some(TensorQuantConfig::linear(8, true, None).unwrap())],
        output_configs: vec![None],
    });
    let (exec, device) = prepare(&g);
    let mut sim = QuantSimulation::new(&g, IdentityFakeQuant);
    exec.run(feed(&device, &[1.0, 2.0, 3.0], &[3]), &mut [&mut sim]).unwrap();
    assert_eq!(sim.applied, (2, 1), "both Add inputs and its output, nothing for Neg");
}

#[test]
fn unsupported_operator_names_type_node_domain_and_opset() {
    let mut g = Graph::new("g");
    let x = g.ensure_variable("x");
    let y = g.ensure_variable("y");
    g.add_graph_input(x).unwrap();
    g.add_operation(Operation::new("FancyOp", "fancy_1").with_domain("com.example", 3), &[Some(x)], &[Some(y)])
        .unwrap();
    g.add_graph_output(y).unwrap();
    let err = Executor::new(&g, &OpRegistry::builtin(), &Device::cpu(), &|_| 3).err().unwrap();
    assert!(matches!(err, ExecError::Unsupported { .. }));
    let msg = err.to_string();
    for part in ["FancyOp", "fancy_1", "com.example", "opset 3"] {
        assert!(msg.contains(part), "{msg}");
    }
}

#[test]
fn shape_mismatch_names_node_and_both_shapes() {
    let g = graph();
    let (exec, device) = prepare(&g);
    let err = exec.run(feed(&device, &[1.0, 2.0, 3.0, 4.0], &[4]), &mut []).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("add") && msg.contains("[4]") && msg.contains("[3]"), "{msg}");
}

#[test]
fn missing_and_unknown_feeds_are_errors() {
    let g = graph();
    let (exec, device) = prepare(&g);
    let err = exec.run(vec![], &mut []).unwrap_err();
    assert!(err.to_string().contains("`x`") && err.to_string().contains("not fed"), "{err}");
    let bad = vec![("nope".to_string(), Tensor::from_f32(&[1], vec![1.0], &device).into())];
    let err = exec.run(bad, &mut []).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn user_registered_operator_overrides_builtin() {
    use mppq_exec::{Kernel, KernelContext};
    use std::sync::Arc;
    struct Doubler;
    impl Kernel for Doubler {
        fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> mppq_exec::Result<Vec<Option<Value>>> {
            let x = ctx.inputs(inputs).tensor(0)?;
            let v: Vec<f32> = x.to_f32_vec().iter().map(|v| v * 2.0).collect();
            Ok(vec![Some(Tensor::from_f32(&x.shape(), v, ctx.device).into())])
        }
    }
    let g = graph();
    let mut registry = OpRegistry::builtin();
    registry.register("", "Relu", 1, Arc::new(|_| Ok(Box::new(Doubler))));
    let device = Device::cpu();
    let exec = Executor::new(&g, &registry, &device, &|_| 17).unwrap();
    let out = exec.run(feed(&device, &[-1.0, 2.0, 3.0], &[3]), &mut []).unwrap();
    assert_eq!(out[0].1.as_tensor().unwrap().to_f32_vec(), vec![-1.0, 6.0, 9.0]);
}

/// A bool tensor whose bytes are not 0 or 1 (a mutated model's initializer) reads as true where
/// the byte is non-zero, as NumPy and ONNX Runtime read it; Burn used to panic on the bit pattern
/// at the first conversion (a fuzz finding, through a Loop's condition).
#[test]
fn bool_bytes_other_than_0_and_1_are_true() {
    let data = TensorData::from_packed(mppq_ir::DataType::Bool, vec![4], vec![0, 1, 5, 255]).unwrap();
    let t = Tensor::from_data(&data, &Device::cpu()).unwrap();
    assert_eq!(t.to_f64_vec(), vec![0.0, 1.0, 1.0, 1.0]);
}

/// Reading a float tensor as integers (an operator's K or shape input given as float by a mutated
/// model) saturates instead of panicking inside Burn (a fuzz finding, through TopK's K).
#[test]
fn float_values_read_as_integers_saturate() {
    let t = Tensor::from_f32(&[4], vec![2.7, -1e30, f32::NAN, 1e30], &Device::cpu());
    assert_eq!(t.to_i64_vec(), vec![2, i64::MIN, 0, i64::MAX]);
}
