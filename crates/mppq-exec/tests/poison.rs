//! A backend panic caught by the engine: on the CPU it is one failed run; on a GPU (wgpu) it
//! poisons the device, so every later run is a typed error instead of possibly wrong numbers.
//! (Own test binary: the poisoning is process-wide.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_exec::{Device, ExecError, Executor, Kernel, KernelContext, OpRegistry, Tensor, Value};
use mppq_ir::{Graph, Operation};
use std::sync::Arc;

/// A kernel that panics the way Burn's asserts do.
struct Panics;
impl Kernel for Panics {
    fn run(&self, _ctx: &KernelContext<'_>, _inputs: Vec<Option<Value>>) -> mppq_exec::Result<Vec<Option<Value>>> {
        panic!("simulated backend assertion");
    }
}

/// x → Boom → y and x → Neg → z, with Boom panicking.
fn graph() -> Graph {
    let mut g = Graph::new("g");
    let x = g.ensure_variable("x");
    g.add_graph_input(x).unwrap();
    let y = g.ensure_variable("y");
    let z = g.ensure_variable("z");
    g.add_operation(Operation::new("Boom", "boom").with_opset(17), &[Some(x)], &[Some(y)]).unwrap();
    g.add_operation(Operation::new("Neg", "neg").with_opset(17), &[Some(x)], &[Some(z)]).unwrap();
    g.add_graph_output(y).unwrap();
    g.add_graph_output(z).unwrap();
    g
}

/// Runs Boom (panics), then Neg alone; returns the two results.
fn boom_then_neg(device: &Device) -> (ExecError, mppq_exec::Result<Vec<f32>>) {
    let mut registry = OpRegistry::builtin();
    registry.register("", "Boom", 1, Arc::new(|_| Ok(Box::new(Panics))));
    let exec = Executor::new(&graph(), &registry, device, &|_| 17).unwrap();
    let feed = || vec![("x".to_string(), Tensor::from_f32(&[2], vec![1.0, -2.0], device).into())];
    let err = exec.run(feed(), &mut []).unwrap_err();
    let neg = exec.run_until(feed(), &["z".to_string()], &mut []).map(|out| out[0].1.as_tensor().unwrap().to_f32_vec());
    (err, neg)
}

#[test]
fn cpu_panic_fails_one_run_only() {
    let device = Device::cpu();
    let (err, neg) = boom_then_neg(&device);
    assert!(matches!(&err, ExecError::Backend { node, .. } if node == "boom"), "{err}");
    assert_eq!(neg.unwrap(), vec![-1.0, 2.0]);
    assert!(device.poisoned().is_none());
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_panic_poisons_the_device() {
    let device = Device::wgpu();
    let (err, neg) = boom_then_neg(&device);
    assert!(matches!(&err, ExecError::Backend { node, .. } if node == "boom"), "{err}");
    let later = neg.unwrap_err();
    assert!(
        matches!(&later, ExecError::DevicePoisoned { node, cause, .. } if node == "neg" && cause.contains("boom")),
        "{later}"
    );
    assert!(device.poisoned().is_some_and(|why| why.contains("simulated backend assertion")));
}
