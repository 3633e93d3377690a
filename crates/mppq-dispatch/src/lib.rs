//! Dispatchers of mppq: decide for every operation whether it runs quantized, in float, or
//! as shape-or-index (SOI) arithmetic, and say which rule decided.
//!
//! Built-in dispatchers (one module each): [`allin`], [`aggressive`], [`conservative`],
//! [`pointwise`], [`perseus`]. All of them
//! - put the shape-or-index region (see [`analysis::soi_region`]) in [`TargetPrecision::Soi`];
//! - never give a quantized precision to an op type the quantizer does not declare
//!   ([`DispatchContext::quantable_types`]): such ops get FP32, reason
//!   `quantizer does not declare <type>`;
//! - keep the user's [`IgnoredScope`] in FP32 (reason `ignored scope: ...`).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mppq_dispatch::{DispatchContext, dispatcher_by_name};
//! use mppq_ir::quant::TargetPrecision;
//! let mut model = mppq_onnx::load_model("model.onnx")?;
//! let ctx = DispatchContext::new(TargetPrecision::Int8, ["Conv", "Relu", "Add", "Gemm"]);
//! let dispatch = dispatcher_by_name("conservative")?.dispatch(&model.graph, &ctx)?;
//! print!("{dispatch}");
//! dispatch.apply(&mut model.graph)?;
//! # Ok(()) }
//! ```

pub mod aggressive;
pub mod allin;
pub mod analysis;
pub mod conservative;
pub mod context;
pub mod dispatch;
pub mod error;
pub mod perseus;
pub mod pointwise;

pub use aggressive::Aggressive;
pub use allin::Allin;
pub use conservative::Conservative;
pub use context::{DispatchContext, IgnoredScope, SubgraphScope};
pub use dispatch::{Decision, Dispatch};
pub use error::DispatchError;
pub use perseus::Perseus;
pub use pointwise::Pointwise;

use mppq_ir::Graph;
pub use mppq_ir::quant::TargetPrecision;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Decides the precision of every operation of a graph.
pub trait Dispatcher: Send + Sync {
    /// The name it is registered under.
    fn name(&self) -> &str;
    /// One decision per operation of `graph` (sub-graph bodies are not dispatched).
    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError>;
}

type Registry = RwLock<BTreeMap<String, Arc<dyn Dispatcher>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let builtins: [Arc<dyn Dispatcher>; 5] =
            [Arc::new(Allin), Arc::new(Aggressive), Arc::new(Conservative), Arc::new(Pointwise), Arc::new(Perseus)];
        RwLock::new(builtins.into_iter().map(|d| (d.name().to_string(), d)).collect())
    })
}

/// The dispatcher registered as `name`.
pub fn dispatcher_by_name(name: &str) -> Result<Arc<dyn Dispatcher>, DispatchError> {
    let map = registry().read().unwrap_or_else(|e| e.into_inner());
    map.get(name).cloned().ok_or_else(|| DispatchError::UnknownDispatcher {
        name: name.to_string(),
        valid: map.keys().cloned().collect(),
    })
}

/// Names of the registered dispatchers, sorted.
pub fn dispatcher_names() -> Vec<String> {
    registry().read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
}

/// Registers a user dispatcher under its [`Dispatcher::name`]; a taken name is an error.
pub fn register_dispatcher(dispatcher: Arc<dyn Dispatcher>) -> Result<(), DispatchError> {
    let mut map = registry().write().unwrap_or_else(|e| e.into_inner());
    let name = dispatcher.name().to_string();
    if map.contains_key(&name) {
        return Err(DispatchError::DuplicateDispatcher(name));
    }
    map.insert(name, dispatcher);
    Ok(())
}
