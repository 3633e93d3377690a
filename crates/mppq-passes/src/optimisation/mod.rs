//! Optimisation passes, switched on by `--optimize` level and each guarded
//! ([`crate::runtime::guard`]): transforms of the float graph checked by recalibrating
//! ([`equalization`], [`ssd_equalization`], [`channel_split`], [`smooth_quant`]), observer choices
//! ([`isotone_calibration`], [`range_search`]) and corrections of calibrated parameters
//! ([`bias_correction`]).

pub mod bias_correction;
pub mod channel_split;
pub mod equalization;
pub mod isotone_calibration;
pub mod range_search;
pub mod smooth_quant;
pub mod ssd_equalization;
#[cfg(test)]
mod tests;
