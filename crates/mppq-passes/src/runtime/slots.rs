//! What the passes share about config slots beyond where they sit (that is
//! `mppq_ir::quant::location`): whether a config still quantizes its tensor, and choosing the
//! observer of uncalibrated ones.

use mppq_ir::Graph;
use mppq_ir::quant::{ConfigLocation, QuantizationState, TensorQuantConfig};

/// Whether a config (still) quantizes its tensor itself: calibrated or about to be.
pub fn quantizes(c: &TensorQuantConfig) -> bool {
    matches!(c.state, QuantizationState::Initial | QuantizationState::Activated | QuantizationState::Passive)
}

/// Gives every still-uncalibrated, per-tensor, integer config at `locations` the observer `kind`; returns
/// how many changed (observer-choosing passes: `isotone_calibration`, `range_search`).
pub fn choose_observer(graph: &mut Graph, locations: &[ConfigLocation], kind: mppq_ir::quant::ObserverKind) -> usize {
    let mut changed = 0;
    for loc in locations {
        if let Some(c) = mppq_ir::quant::config_at_mut(graph, *loc)
            && c.state == QuantizationState::Initial
            && c.channel_axis.is_none()
            && !c.policy.is_floating()
            && c.observer != kind
        {
            c.observer = kind;
            changed += 1;
        }
    }
    changed
}
