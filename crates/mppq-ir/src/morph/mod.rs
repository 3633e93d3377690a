//! Graph morphs: structural rewrites that keep the function of the graph and need no executor
//! (the executor-free half of PPQ's graph merger). Each morph is one module.

mod channel_affine;
mod fold_batchnorm;
mod fold_constants;
mod fuse_qdq;
mod upgrade_opset;

pub use channel_affine::channel_affine_to_batchnorm;
pub use fold_batchnorm::fold_batchnorm;
pub use fold_constants::fold_constants;
pub use fuse_qdq::fuse_qdq_conv;
pub use upgrade_opset::{CHANGES, OpsetBlocker, OpsetChange, OpsetRewrite, OpsetUpgrade, blockers, upgrade_opset};
