//! Platforms: who runs the quantized model. A platform bundles what quantizing *for* a target
//! needs — the dispatcher it prefers, the quantizer that configures each operation, the operator
//! implementations the simulation must use (a target may compute an op differently), the parser
//! that reads a model and the exporters that write what the target loads (by name, from the
//! exporter registry, `crate::export`).
//!
//! Built-ins (one file each in `platforms/`, listed by `mppq platforms`): `default` (ONNX Runtime
//! QDQ), the TensorRT, ncnn, Qualcomm, OpenVINO and OpenPPL targets, `lowbit`, FP8, `pow2-int8`,
//! `academic-int8`. Users add
//! their own with [`register_platform`] and add or override operators for a platform with
//! [`register_operation`] — from their own crate, through this public API only
//! (`examples/custom-platform` does exactly that).

use crate::error::{ApiError, Result};
use crate::registry::Registry;
use mppq_exec::{KernelBuilder, OpRegistry};
use mppq_ir::Model;
use mppq_quant::quantizer::Quantizer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

/// User choices a quantizer may honour. `None` = the platform's default. A platform that cannot
/// honour a given choice returns an error naming it (never silently ignores it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuantizerOptions {
    /// Activation bits.
    pub bits: Option<u32>,
    /// Weight bits (defaults to `bits`).
    pub weight_bits: Option<u32>,
    /// Per-channel weights (true) or per-tensor (false).
    pub per_channel: Option<bool>,
    /// Symmetric (true) or asymmetric (false) activations.
    pub symmetric: Option<bool>,
    /// Activation observer: minmax, percentile, kl, mse, isotone, constant, floating, hist.
    pub observer: Option<mppq_ir::quant::ObserverKind>,
    /// ONNX Runtime's `reduce_range`: 7-bit weights ([-64, 63]), which keep ORT's u8×s8 integer
    /// kernels exact on x86 CPUs without VNNI (their `pmaddubsw` saturates with 8-bit weights).
    pub reduce_range: Option<bool>,
}

/// One of the [`QuantizerOptions`], for a platform to say which ones it fixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantizerOption {
    Bits,
    WeightBits,
    PerChannel,
    Symmetric,
    Observer,
    ReduceRange,
}

impl QuantizerOption {
    pub const ALL: [QuantizerOption; 6] =
        [Self::Bits, Self::WeightBits, Self::PerChannel, Self::Symmetric, Self::Observer, Self::ReduceRange];

    /// The key in the setting file's `[quantizer]` section.
    pub fn key(self) -> &'static str {
        match self {
            Self::Bits => "bits",
            Self::WeightBits => "weight_bits",
            Self::PerChannel => "per_channel",
            Self::Symmetric => "symmetric",
            Self::Observer => "observer",
            Self::ReduceRange => "reduce_range",
        }
    }
}

impl QuantizerOptions {
    /// Whether the user set `option`.
    pub fn is_set(&self, option: QuantizerOption) -> bool {
        match option {
            QuantizerOption::Bits => self.bits.is_some(),
            QuantizerOption::WeightBits => self.weight_bits.is_some(),
            QuantizerOption::PerChannel => self.per_channel.is_some(),
            QuantizerOption::Symmetric => self.symmetric.is_some(),
            QuantizerOption::Observer => self.observer.is_some(),
            QuantizerOption::ReduceRange => self.reduce_range.is_some(),
        }
    }

    /// Errors when an option the platform does not honour was set: a platform lists what it
    /// honours, so an option added later is refused by every platform that does not know it,
    /// never silently ignored.
    pub fn honour_only(&self, platform: &str, honoured: &[QuantizerOption]) -> Result<()> {
        match QuantizerOption::ALL.into_iter().find(|o| self.is_set(*o) && !honoured.contains(o)) {
            Some(option) => Err(ApiError::Setting(format!(
                "platform `{platform}` has a fixed `{}`; use the `lowbit` platform (or your own) to choose it",
                option.key()
            ))),
            None => Ok(()),
        }
    }
}

/// A quantization target.
pub trait Platform: Send + Sync {
    /// Unique name, used by `--platform`.
    fn name(&self) -> &str;
    /// One line for listings.
    fn description(&self) -> &str;
    /// The dispatcher used unless the user picks another.
    fn dispatcher(&self) -> &str {
        "conservative"
    }
    /// The quantizer for these options.
    fn quantizer(&self, options: &QuantizerOptions) -> Result<Box<dyn Quantizer>>;
    /// Adds or overrides operator implementations on top of the built-in ones.
    fn register_operators(&self, _registry: &mut OpRegistry) {}
    /// Reads a model: by default with the parser registry ([`crate::parser`]: ONNX, Caffe, and
    /// the user's); `weights` is the separate weights file of formats that have one.
    fn parse(&self, path: &Path, weights: Option<&Path>) -> Result<Model> {
        crate::parser::parse_model(path, weights)
    }
    /// The exporters run unless the user picks others (`--export`, `exporters = [...]`): by
    /// default the QDQ model, the quantization JSON and the fused float model.
    fn exporters(&self) -> Vec<String> {
        crate::export::DEFAULT_EXPORTERS.iter().map(|e| e.to_string()).collect()
    }
    /// Exporter options this platform needs (`[export.NAME]` sections, by exporter name); the
    /// user's own keys in the setting file override them key by key.
    fn export_options(&self) -> BTreeMap<String, crate::export::ExportOptions> {
        BTreeMap::new()
    }
}

type OperatorMap = RwLock<BTreeMap<String, Vec<(String, String, i64, KernelBuilder)>>>;

static PLATFORMS: Registry<dyn Platform> =
    Registry::new("platform", || crate::platforms::builtin().into_iter().map(|p| (p.name().to_string(), p)).collect());

fn operators() -> &'static OperatorMap {
    static OPERATORS: OnceLock<OperatorMap> = OnceLock::new();
    OPERATORS.get_or_init(Default::default)
}

/// Registers a platform; a name already taken is an error (built-ins cannot be replaced by accident).
pub fn register_platform(platform: Arc<dyn Platform>) -> Result<()> {
    let name = platform.name().to_string();
    PLATFORMS.register(&name, platform)
}

/// The platform called `name`; the error lists the known ones.
pub fn platform_by_name(name: &str) -> Result<Arc<dyn Platform>> {
    PLATFORMS.get(name)
}

/// Names of every registered platform, sorted.
pub fn platform_names() -> Vec<String> {
    PLATFORMS.names()
}

/// Adds (or overrides) an operator implementation used whenever `platform` is simulated.
pub fn register_operation(
    platform: &str,
    domain: &str,
    op_type: &str,
    since_opset: i64,
    builder: KernelBuilder,
) -> Result<()> {
    platform_by_name(platform)?;
    let mut map = operators().write().unwrap_or_else(|e| e.into_inner());
    map.entry(platform.to_string()).or_default().push((domain.to_string(), op_type.to_string(), since_opset, builder));
    Ok(())
}

/// The operator table for simulating `platform`: built-ins, then the platform's own operators,
/// then those registered with [`register_operation`] (later registrations win).
pub fn operator_registry(platform: &dyn Platform) -> OpRegistry {
    let mut registry = OpRegistry::builtin();
    platform.register_operators(&mut registry);
    let map = operators().read().unwrap_or_else(|e| e.into_inner());
    for (domain, op_type, since, builder) in map.get(platform.name()).into_iter().flatten() {
        registry.register(domain, op_type, *since, builder.clone());
    }
    registry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_listed_and_unknown_names_list_them() {
        let names = platform_names();
        for n in [
            "default",
            "ort-int8",
            "trt-int8",
            "trt-lowbit",
            "trt-implicit-int8",
            "lowbit",
            "fp8-e4m3",
            "fp8-e5m2",
            "academic-int8",
            "pow2-int8",
            "openvino-int8",
            "ncnn-int8",
            "qnn-int8",
            "snpe-int8",
            "ppl-cuda-int8",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        let err = platform_by_name("tensorrt").err().unwrap().to_string();
        assert!(err.contains("unknown platform `tensorrt`") && err.contains("default"), "{err}");
        let dup = register_platform(platform_by_name("default").unwrap()).unwrap_err().to_string();
        assert!(dup.contains("already registered"), "{dup}");
    }

    #[test]
    fn fixed_options_are_refused_not_ignored() {
        let p = platform_by_name("trt-int8").unwrap();
        let err =
            p.quantizer(&QuantizerOptions { symmetric: Some(false), ..Default::default() }).err().unwrap().to_string();
        assert!(err.contains("symmetric") && err.contains("trt-int8"), "{err}");
    }
}
