//! Calibration passes: weights from their values ([`parameter_quantize`]), activations from
//! the calibration data ([`runtime_calibration`]), what must stay float once ranges are known
//! ([`mixed_range_concat`]), shared parameters ([`quant_alignment`]), derived ones
//! ([`passive_parameter_quantize`]) and baked weights ([`parameter_baking`]).

pub mod mixed_range_concat;
pub mod parameter_baking;
pub mod parameter_quantize;
pub mod passive_parameter_quantize;
pub mod quant_alignment;
pub mod runtime_calibration;
