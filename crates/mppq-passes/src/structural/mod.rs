//! Structural passes: they change the float graph's operations (folding, fusion) or remove
//! quantization that would happen twice, and never read calibration data.

pub mod fold_batchnorm;
pub mod fold_constants;
pub mod quant_fusion;
pub mod redundant_quant_simplify;
