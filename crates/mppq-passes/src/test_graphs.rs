//! Tiny hand-built graphs and a harness to run passes and simulations on them (unit tests).

use crate::error::Result;
use crate::runtime::pass::{Pass, PassContext, PassReport};
use crate::runtime::progress::NoProgress;
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::quant::{ConfigLocation, TensorQuantConfig, config_at};
use mppq_ir::{Attribute, Graph, Operation, TensorData, VarId, Variable};
use mppq_quant::metrics::OutputNoise;
use mppq_quant::quantizer::{Quantizer, init_quantization};

pub type Feeds = Vec<(String, Value)>;

pub struct Harness {
    pub graph: Graph,
    pub registry: OpRegistry,
    pub device: Device,
    pub batches: Vec<Feeds>,
}

/// Deterministic values in [−scale·1.5, scale·1.5) (a small LCG; no RNG crate needed).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0 * scale
        })
        .collect()
}

impl Harness {
    pub fn new(graph: Graph) -> Self {
        Self { graph, registry: OpRegistry::builtin(), device: Device::cpu(), batches: Vec::new() }
    }

    /// One feed of graph input `name` with deterministic values.
    pub fn input(&self, name: &str, shape: &[usize], seed: f32) -> Feeds {
        let n = shape.iter().product();
        let v = values(n, seed.to_bits() as u64, 1.0);
        vec![(name.to_string(), Value::Tensor(Tensor::from_f32(shape, v, &self.device)))]
    }

    /// Adds `n` calibration batches of input `name`.
    pub fn calibration(&mut self, name: &str, shape: &[usize], n: usize) {
        self.batches = (0..n).map(|i| self.input(name, shape, i as f32 + 0.5)).collect();
    }

    /// Gives every op a quantizer declares the quantizer's precision and configs.
    pub fn quantize(&mut self, quantizer: &dyn Quantizer) {
        let types = quantizer.quant_operation_types();
        let ids: Vec<_> =
            self.graph.operations().filter(|(_, o)| types.contains(&o.op_type.as_str())).map(|(id, _)| id).collect();
        for id in ids {
            self.graph.operation_mut(id).unwrap().precision = quantizer.target_precision();
        }
        init_quantization(&mut self.graph, quantizer).unwrap();
    }

    pub fn try_pass(&mut self, pass: &mut dyn Pass) -> Result<PassReport> {
        let mut progress = NoProgress;
        let mut ctx =
            PassContext::new(&mut self.graph, &self.registry, &self.device, &|_| 17, &self.batches, &mut progress);
        pass.run(&mut ctx)
    }

    pub fn run_pass(&mut self, pass: &mut dyn Pass) -> PassReport {
        self.try_pass(pass).unwrap()
    }

    fn executor(&self) -> Executor {
        Executor::new(&self.graph, &self.registry, &self.device, &|_| 17).unwrap()
    }

    /// The first graph output in float.
    pub fn run_fp32(&self, feeds: &Feeds) -> Vec<f32> {
        let out = self.executor().run(feeds.clone(), &mut []).unwrap();
        out[0].1.as_tensor().unwrap().to_f32_vec()
    }

    /// The first graph output under fake-quant simulation.
    pub fn run_sim(&self, feeds: &Feeds) -> Vec<f32> {
        let mut sim = QuantSimulation::new(&self.graph, BurnFakeQuant);
        let out = self.executor().run(feeds.clone(), &mut [&mut sim]).unwrap();
        out[0].1.as_tensor().unwrap().to_f32_vec()
    }

    /// How many (inputs, outputs) the simulation fake-quantizes in one run.
    pub fn sim_applied(&self, feeds: &Feeds) -> (usize, usize) {
        let mut sim = QuantSimulation::new(&self.graph, BurnFakeQuant);
        self.executor().run(feeds.clone(), &mut [&mut sim]).unwrap();
        sim.applied
    }

    /// Runs the pipeline of `setting` (after [`Harness::quantize`]).
    pub fn pipeline(&mut self, setting: &crate::PipelineSetting) -> Vec<PassReport> {
        let mut passes = crate::Pipeline::from_setting(setting).unwrap();
        let mut progress = NoProgress;
        let mut ctx =
            PassContext::new(&mut self.graph, &self.registry, &self.device, &|_| 17, &self.batches, &mut progress);
        ctx.guard = setting.guard_options();
        crate::run_pipeline(&mut ctx, &mut passes).unwrap()
    }

    pub fn config(&self, loc: ConfigLocation) -> &TensorQuantConfig {
        config_at(&self.graph, loc).unwrap()
    }

    pub fn op(&self, name: &str) -> mppq_ir::OpId {
        self.graph.op_id(name).unwrap()
    }
}

pub fn var(g: &mut Graph, name: &str) -> VarId {
    g.add_variable(Variable::new(name)).unwrap()
}

pub fn init(g: &mut Graph, name: &str, shape: &[usize], seed: u64, scale: f32) -> VarId {
    let n = shape.iter().product();
    g.add_initializer(name, TensorData::from_vec(shape.to_vec(), &values(n, seed, scale)).unwrap()).unwrap()
}

pub fn graph_with_input(name: &str) -> (Graph, VarId) {
    let mut g = Graph::new("g");
    let x = var(&mut g, name);
    g.add_graph_input(x).unwrap();
    (g, x)
}

pub fn conv(g: &mut Graph, name: &str, x: VarId, cin: usize, cout: usize, seed: u64) -> VarId {
    let w = init(g, &format!("{name}.w"), &[cout, cin, 3, 3], seed, 0.3);
    let b = init(g, &format!("{name}.b"), &[cout], seed + 1, 0.2);
    let y = var(g, &format!("{name}.out"));
    let op = Operation::new("Conv", name).with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1]));
    g.add_operation(op, &[Some(x), Some(w), Some(b)], &[Some(y)]).unwrap();
    y
}

pub fn unary(g: &mut Graph, op_type: &str, name: &str, x: VarId) -> VarId {
    let y = var(g, &format!("{name}.out"));
    g.add_operation(Operation::new(op_type, name), &[Some(x)], &[Some(y)]).unwrap();
    y
}

/// x[1,2,4,4] → Conv(2→3, 3×3, pad 1, bias) → BatchNormalization → Relu.
pub fn conv_bn_relu() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let c = conv(&mut g, "conv", x, 2, 3, 1);
    let mut bn_inputs = vec![Some(c)];
    for (i, (name, scale)) in [("gamma", 0.3f32), ("beta", 0.2), ("mean", 0.1), ("var", 0.1)].into_iter().enumerate() {
        let mut v = values(3, 10 + i as u64, scale);
        if name == "gamma" || name == "var" {
            v.iter_mut().for_each(|x| *x = 1.0 + x.abs());
        }
        bn_inputs.push(Some(g.add_initializer(name, TensorData::from_vec(vec![3], &v).unwrap()).unwrap()));
    }
    let b = var(&mut g, "bn.out");
    g.add_operation(Operation::new("BatchNormalization", "bn"), &bn_inputs, &[Some(b)]).unwrap();
    let y = unary(&mut g, "Relu", "relu", b);
    g.add_graph_output(y).unwrap();
    g
}

/// x[1,2,4,4] → Conv(2→3) → Relu → Conv(3→3) → y; the second Conv reads the Relu output.
pub fn conv_relu_conv() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let c = conv(&mut g, "conv1", x, 2, 3, 1);
    let r = unary(&mut g, "Relu", "relu", c);
    let y = conv(&mut g, "conv2", r, 3, 3, 7);
    g.add_graph_output(y).unwrap();
    g
}

/// x[1,2,4,4] read by Relu `a` and Sigmoid `b`; Concat(a, b) on channels → AveragePool 2×2.
pub fn shared_input_concat_pool() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let a = unary(&mut g, "Relu", "a", x);
    let b = unary(&mut g, "Sigmoid", "b", x);
    let c = var(&mut g, "concat.out");
    g.add_operation(
        Operation::new("Concat", "concat").with_attr("axis", Attribute::Int(1)),
        &[Some(a), Some(b)],
        &[Some(c)],
    )
    .unwrap();
    let p = var(&mut g, "pool.out");
    let pool = Operation::new("MaxPool", "pool").with_attr("kernel_shape", Attribute::Ints(vec![2, 2]));
    g.add_operation(pool, &[Some(c)], &[Some(p)]).unwrap();
    g.add_graph_output(p).unwrap();
    g
}

/// x[1,2,4,4] read by Relu `a` and Sigmoid `b`; Add(a, b) → Clip(min, max) with constant bounds.
pub fn add_branches_clip() -> Graph {
    let (mut g, x) = graph_with_input("x");
    let a = unary(&mut g, "Relu", "a", x);
    let b = unary(&mut g, "Sigmoid", "b", x);
    let sum = var(&mut g, "add.out");
    g.add_operation(Operation::new("Add", "add"), &[Some(a), Some(b)], &[Some(sum)]).unwrap();
    let lo = g.add_initializer("clip.min", TensorData::scalar(0.0f32)).unwrap();
    let hi = g.add_initializer("clip.max", TensorData::scalar(2.0f32)).unwrap();
    let y = var(&mut g, "clip.out");
    g.add_operation(Operation::new("Clip", "clip"), &[Some(sum), Some(lo), Some(hi)], &[Some(y)]).unwrap();
    g.add_graph_output(y).unwrap();
    g
}

impl Harness {
    /// Runs one pass as the pipeline would (its statistics collected first), unguarded.
    pub fn run_alone(&mut self, pass: Box<dyn Pass>) -> PassReport {
        let mut progress = NoProgress;
        let mut ctx =
            PassContext::new(&mut self.graph, &self.registry, &self.device, &|_| 17, &self.batches, &mut progress);
        ctx.guard.enabled = false;
        crate::run_pipeline(&mut ctx, &mut [pass]).unwrap().remove(0)
    }

    /// The first graph output in float over `feeds`, concatenated.
    pub fn fp32_over(&self, feeds: &[Feeds]) -> Vec<f32> {
        feeds.iter().flat_map(|f| self.run_fp32(f)).collect()
    }

    /// The first graph output under simulation over `feeds`, concatenated.
    pub fn sim_over(&self, feeds: &[Feeds]) -> Vec<f32> {
        feeds.iter().flat_map(|f| self.run_sim(f)).collect()
    }
}

/// Signal-to-noise ratio of `got` against `reference`, in dB, the sums as the guard takes them
/// (one output, one batch); an exact match counts a noise of 1e-30, so it stays finite.
pub fn snr_db(reference: &[f32], got: &[f32]) -> f64 {
    let mut sums = OutputNoise::new(1);
    sums.add(0, reference, got);
    let (signal, noise) = sums.sums(0);
    mppq_quant::metrics::snr_db_from_sums(signal, noise.max(1e-30))
}

/// The largest difference between `a` and `b`, relative to the largest |a|.
pub fn max_relative_difference(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}
