//! The block runner: run one block of the graph (the operations between named cuts, cut out with
//! `Graph::extract`) from cached inputs, as block-wise reconstruction and per-block error
//! measurement need, without running the whole model again for every step.
//!
//! The cache holds the block's input values for the calibration batches, taken from one run of
//! the full graph (float or simulated). It is bounded in memory: when the inputs of every batch
//! would take more than [`BlockRunner::DEFAULT_CACHE_BYTES`] (or the limit given), an evenly
//! spaced subset of the batches is cached instead (subsampling, not spilling to disk: the blocks
//! train on a subset, and `BlockRunner::batches` says which batches it kept). One batch is always
//! kept, even when it alone exceeds the bound.

use crate::error::{InPass, PassError, Result};
use crate::runtime::pass::PassContext;
use crate::runtime::statistics::GraphMode;
use mppq_exec::{BurnFakeQuant, ExecHook, Executor, QuantSimulation, SimulationMemo, Value};
use mppq_ir::Graph;

/// A block and the cached values of its inputs.
pub struct BlockRunner {
    /// The block as a graph of its own (names as in the full graph).
    pub graph: Graph,
    exec: Executor,
    input_names: Vec<String>,
    /// One entry per cached batch: the block's input values, in `input_names` order.
    cache: Vec<Vec<Value>>,
    /// Which calibration batches the cache holds.
    pub batches: Vec<usize>,
    /// Bytes the cache holds.
    pub cached_bytes: usize,
}

/// Collects the values of the cut variables as the full graph runs.
struct CaptureHook {
    outputs_of: std::collections::HashMap<mppq_ir::OpId, Vec<(usize, usize)>>,
    captured: Vec<Option<Value>>,
}

impl ExecHook for CaptureHook {
    fn after_op(&mut self, op: &mppq_exec::hooks::OpInfo<'_>, outputs: &mut [Option<Value>]) -> mppq_exec::Result<()> {
        for (slot, index) in self.outputs_of.get(&op.id).into_iter().flatten() {
            self.captured[*index] = outputs.get(*slot).cloned().flatten();
        }
        Ok(())
    }
}

fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Tensor(t) => t.numel() * t.burn_dtype().size(),
        _ => 0,
    }
}

impl BlockRunner {
    /// The default bound of the input cache: 1 GiB.
    pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

    /// Cuts the block computing `outputs` from `inputs` (variable names) out of `ctx.graph` and
    /// caches its inputs over the calibration batches, taken on `mode`'s graph, within
    /// `cache_bytes`. A cut input that is a graph input is taken from the batch itself.
    pub fn new(
        ctx: &mut PassContext<'_>,
        pass: &'static str,
        inputs: &[&str],
        outputs: &[&str],
        mode: GraphMode,
        cache_bytes: usize,
    ) -> Result<Self> {
        Self::new_limited(ctx, pass, inputs, outputs, mode, cache_bytes, usize::MAX)
    }

    /// [`Self::new`] caching at most `max_batches` batches (evenly spaced).
    pub fn new_limited(
        ctx: &mut PassContext<'_>,
        pass: &'static str,
        inputs: &[&str],
        outputs: &[&str],
        mode: GraphMode,
        cache_bytes: usize,
        max_batches: usize,
    ) -> Result<Self> {
        let ids = |names: &[&str]| names.iter().map(|n| ctx.graph.var_named(n)).collect::<mppq_ir::Result<Vec<_>>>();
        let (in_ids, out_ids) = (ids(inputs).in_pass(pass)?, ids(outputs).in_pass(pass)?);
        let graph = ctx.graph.extract(&in_ids, &out_ids).in_pass(pass)?;
        let exec = Executor::new(&graph, ctx.registry, ctx.device, ctx.opsets).in_pass(pass)?;
        let full = ctx.executor(pass)?;
        let mut outputs_of: std::collections::HashMap<_, Vec<(usize, usize)>> = Default::default();
        for (index, v) in in_ids.iter().enumerate() {
            if let Some(p) = ctx.graph.producer(*v) {
                let slot = ctx.graph.operation(p).in_pass(pass)?.outputs().iter().position(|o| *o == Some(*v));
                outputs_of.entry(p).or_default().extend(slot.map(|s| (s, index)));
            }
        }
        let total = ctx.data.batch_count();
        let mut runner = Self {
            graph,
            exec,
            input_names: inputs.iter().map(|s| s.to_string()).collect(),
            cache: Vec::new(),
            batches: Vec::new(),
            cached_bytes: 0,
        };
        let mut hook = CaptureHook { outputs_of, captured: vec![None; in_ids.len()] };
        // The first batch tells the size of one entry, and so how many batches fit.
        let mut plan: Vec<usize> = (0..total.min(1)).collect();
        ctx.progress.begin(&format!("{pass}: caching block inputs"), total as u64);
        let mut next = 0;
        let memo = SimulationMemo::new();
        while next < plan.len() {
            let batch = plan[next];
            next += 1;
            let feeds = ctx.batch(batch, pass)?;
            let fed: std::collections::HashMap<String, Value> = feeds.iter().cloned().collect();
            hook.captured = vec![None; in_ids.len()];
            match mode {
                GraphMode::Float => full.run(feeds, &mut [&mut hook]),
                GraphMode::Simulated => {
                    let mut sim = QuantSimulation::new(ctx.graph, BurnFakeQuant).with_memo(&memo);
                    full.run(feeds, &mut [&mut sim, &mut hook])
                }
            }
            .in_pass(pass)?;
            let mut entry = Vec::with_capacity(inputs.len());
            for (i, name) in inputs.iter().enumerate() {
                let value = hook.captured[i].take().or_else(|| fed.get(*name).cloned()).ok_or_else(|| {
                    PassError::Invalid { pass, message: format!("block input `{name}` was not computed by the run") }
                })?;
                entry.push(value);
            }
            let bytes: usize = entry.iter().map(value_bytes).sum();
            if batch == 0 && total > 1 {
                let fit = (cache_bytes / bytes.max(1)).min(max_batches).clamp(1, total);
                // Evenly spaced batches, the first included.
                plan = (0..fit).map(|k| k * total / fit).collect();
                plan.dedup();
            }
            runner.cached_bytes += bytes;
            runner.cache.push(entry);
            runner.batches.push(batch);
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        Ok(runner)
    }

    /// How many batches the cache holds.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Runs the block on cached entry `index` (not the batch number: see [`Self::batches`]) with
    /// `hooks` (a `QuantSimulation` over [`Self::graph`] simulates the block); returns the
    /// block's outputs by name.
    pub fn run(&self, index: usize, hooks: &mut [&mut dyn ExecHook]) -> Result<Vec<(String, Value)>> {
        self.exec.run(self.feeds(index)?, hooks).in_pass("block")
    }

    /// The block's inputs of cached entry `index`, by name.
    pub fn feeds(&self, index: usize) -> Result<Vec<(String, Value)>> {
        let entry = self.cache.get(index).ok_or_else(|| PassError::Invalid {
            pass: "block",
            message: format!("no cached entry {index} (there are {})", self.cache.len()),
        })?;
        Ok(self.input_names.iter().cloned().zip(entry.iter().cloned()).collect())
    }
}

/// The cached block inputs as calibration data of the block graph (entry `i` = cached batch `i`),
/// so passes can calibrate and compare the block on its own.
impl mppq_quant::CalibrationData for BlockRunner {
    fn batch_count(&self) -> usize {
        self.cache.len()
    }

    fn batch(&self, index: usize, _: &mppq_exec::Device) -> std::result::Result<mppq_quant::Feeds, String> {
        let entry =
            self.cache.get(index).ok_or_else(|| format!("no cached entry {index} (there are {})", self.cache.len()))?;
        Ok(self.input_names.iter().cloned().zip(entry.iter().cloned()).collect())
    }
}
