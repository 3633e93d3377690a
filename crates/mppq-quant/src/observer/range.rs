//! From a real range to quantization parameters, and writing parameters into a config. Every
//! observer ends here, so the conventions (zero in range, symmetric `absmax / quant_max`,
//! asymmetric offset, power-of-2 rounding up, scale floor) hold for all of them.

use crate::error::{QuantError, Result};
use mppq_ir::quant::{QuantizationState, TensorQuantConfig};

/// Smallest scale an observer writes (2⁻²⁴): a zero-range or all-zero tensor gets this scale
/// rather than 0. A power of two, so the power-of-2 policy keeps it.
pub const MIN_SCALE: f32 = 1.0 / 16_777_216.0;

/// Rounds a positive scale up to a power of two.
pub fn pow2_up(scale: f64) -> f64 {
    let mut p = scale.log2().ceil().exp2();
    // Guard against log2 rounding: the result is the smallest power of two >= scale.
    while p < scale {
        p *= 2.0;
    }
    while p / 2.0 >= scale {
        p /= 2.0;
    }
    p
}

/// Clamps a raw scale into `[MIN_SCALE, f32::MAX]`, applying the power-of-2 rule if asked.
pub fn finish_scale(raw: f64, power_of_2: bool) -> f64 {
    let mut s = if raw.is_finite() && raw >= f64::from(MIN_SCALE) {
        raw
    } else if raw.is_finite() || raw.is_nan() {
        f64::from(MIN_SCALE)
    } else {
        f64::from(f32::MAX)
    };
    s = s.min(f64::from(f32::MAX));
    if power_of_2 {
        s = pow2_up(s).min(2f64.powi(127));
    }
    s
}

/// Linear `(scale, offset)` for the real range `[lo, hi]` (widened to include 0).
///
/// Symmetric: `scale = max(|lo|, hi) / quant_max` when `quant_min < 0` (signed), `hi / quant_max`
/// when `quant_min >= 0` (unsigned symmetric: negatives clip to 0); offset 0.
/// Asymmetric: `scale = (hi − lo) / (quant_max − quant_min)`,
/// `offset = round(quant_min − lo / scale)` (config rounding) clamped to the quant range.
pub fn linear_params(config: &TensorQuantConfig, lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let qmin = config.quant_min as f64;
    let qmax = config.quant_max as f64;
    let raw = if config.policy.is_symmetric() {
        let levels = if qmax > 0.0 { qmax } else { 1.0 };
        if qmin < 0.0 { lo.abs().max(hi) / levels } else { hi / levels }
    } else {
        (hi - lo) / (qmax - qmin).max(1.0)
    };
    let scale = finish_scale(raw, config.policy.is_power_of_2());
    let offset =
        if config.policy.is_symmetric() { 0.0 } else { config.rounding.round(qmin - lo / scale).clamp(qmin, qmax) };
    (scale, offset)
}

/// Floating `(scale, 0)` mapping `max(|lo|, |hi|)` onto the format's largest value
/// (`quant_max`, e.g. 448 for E4M3).
pub fn floating_params(config: &TensorQuantConfig, lo: f64, hi: f64) -> (f64, f64) {
    let fmax = (config.quant_max as f64).max(1.0);
    (finish_scale(lo.abs().max(hi.abs()) / fmax, config.policy.is_power_of_2()), 0.0)
}

/// The parameters for `[lo, hi]` under `config` (linear or floating).
pub fn params_for(config: &TensorQuantConfig, lo: f64, hi: f64) -> (f64, f64) {
    if config.policy.is_floating() { floating_params(config, lo, hi) } else { linear_params(config, lo, hi) }
}

/// Quantize-dequantize one value with linear parameters (config rounding and clamping).
pub fn fake_quant(config: &TensorQuantConfig, scale: f64, offset: f64, x: f64) -> f64 {
    let q = (config.rounding.round(x / scale) + offset).clamp(config.quant_min as f64, config.quant_max as f64);
    (q - offset) * scale
}

/// Checks that `config` is laid out as the observer was built for.
pub fn check_layout(
    config: &TensorQuantConfig,
    variable: &str,
    observer: &'static str,
    axis: Option<usize>,
) -> Result<()> {
    if config.channel_axis != axis || config.policy.is_per_channel() != axis.is_some() {
        return Err(QuantError::ConfigMismatch {
            variable: variable.into(),
            observer,
            message: format!(
                "observer built for channel axis {axis:?}, config has {:?} ({:?})",
                config.channel_axis, config.policy
            ),
        });
    }
    Ok(())
}

/// Writes one `(scale, offset)` per channel into `config` and activates it.
pub fn write_params(
    config: &mut TensorQuantConfig,
    variable: &str,
    observer: &'static str,
    axis: Option<usize>,
    params: &[(f64, f64)],
) -> Result<()> {
    check_layout(config, variable, observer, axis)?;
    if params.is_empty() {
        return Err(QuantError::NothingObserved { variable: variable.into(), observer, detail: String::new() });
    }
    config.scale = params.iter().map(|(s, _)| *s as f32).collect();
    config.offset = params.iter().map(|(_, o)| *o as f32).collect();
    config.state = QuantizationState::Activated;
    config.validate()?;
    Ok(())
}
