//! Graph morphs: structural rewrites that keep the function of the graph and need no executor
//! (the executor-free half of PPQ's graph merger). Each morph is one module.

mod fold_batchnorm;

pub use fold_batchnorm::fold_batchnorm;
