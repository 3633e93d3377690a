//! The quantization data model carried by the graph: what precision an operation runs in,
//! the policy flags and rounding of a quantized tensor, its lifecycle state, and the tensor /
//! operation configs (with dominance links for shared scales). Behaviour (observers,
//! fake-quant) lives in higher crates; these are the types they share — and the one rule on
//! integer codes that the simulation (mppq-exec) and the exporters (mppq-export) must apply
//! alike: the x86 pair limit ([`pair_limit`]), so that what is simulated is what is written.

pub mod block;
mod config;
pub mod location;
mod observer;
pub mod pair_limit;
mod policy;
mod precision;
mod rounding;
mod state;
mod sync;

pub use block::{BlockGrid, QuantBlock, block_code, block_value};
pub use config::{ConfigLocation, ConfigSide, OperationQuantConfig, TensorQuantConfig};
pub use location::{config_slots, configured_slots, tensor_slots, variable_of};
pub use observer::ObserverKind;
pub use pair_limit::{PairLimit, PairOrder};
pub use policy::{QuantizationPolicy, QuantizationProperty};
pub use precision::TargetPrecision;
pub use rounding::RoundingPolicy;
pub use state::QuantizationState;
pub use sync::{config_at, config_at_mut, dominator_root, sync_dominated};
