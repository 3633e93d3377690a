//! Platforms: who runs the quantized model. A platform bundles what quantizing *for* a target
//! needs — the dispatcher it prefers, the quantizer that configures each operation, the operator
//! implementations the simulation must use (a target may compute an op differently), the parser
//! that reads a model and the exporters that write what the target loads (by name, from the
//! exporter registry, `crate::export`).
//!
//! Built-ins (one file each in `platforms/`, listed by `mppq platforms`): `default` (ONNX Runtime
//! QDQ), the TensorRT, ncnn, Qualcomm, OpenVINO and OpenPPL targets, `lowbit`, FP8, `pow2-int8`,
//! `academic-int8`, `weight-only` (block-wise INT4/INT8 weights, `MatMulNBits`). Users add
//! their own with [`register_platform`]; a platform adds or overrides operators with
//! [`Platform::register_operators`] — from the user's own crate, through this public API only
//! (`examples/custom-platform` does exactly that).
//!
//! Rooms: the [`Platform`] trait and its options (here), the `registry`, the model-format
//! [`parser`]s a platform reads with, and the `builtin` platforms, one file each.

pub(crate) mod builtin;
pub mod parser;
mod registry;

pub use registry::{operator_registry, platform_by_name, platform_names, register_platform};

use crate::error::{ApiError, Result};
use mppq_exec::OpRegistry;
use mppq_ir::Model;
use mppq_quant::quantizer::Quantizer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
    /// The CPU class whose integer arithmetic the export must fit (ONNX Runtime platforms):
    /// `any` (default), `x86-avx2`, `x86-vnni`, `arm64`.
    pub target_cpu: Option<mppq_quant::quantizer::TargetCpu>,
    /// Block-wise weights (`weight-only`): elements per block along the input channels.
    pub block_size: Option<usize>,
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
    TargetCpu,
    BlockSize,
}

impl QuantizerOption {
    pub const ALL: [QuantizerOption; 8] = [
        Self::Bits,
        Self::WeightBits,
        Self::PerChannel,
        Self::Symmetric,
        Self::Observer,
        Self::ReduceRange,
        Self::TargetCpu,
        Self::BlockSize,
    ];

    /// The key in the setting file's `[quantizer]` section.
    pub fn key(self) -> &'static str {
        match self {
            Self::Bits => "bits",
            Self::WeightBits => "weight_bits",
            Self::PerChannel => "per_channel",
            Self::Symmetric => "symmetric",
            Self::Observer => "observer",
            Self::ReduceRange => "reduce_range",
            Self::TargetCpu => "target_cpu",
            Self::BlockSize => "block_size",
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
            QuantizerOption::TargetCpu => self.target_cpu.is_some(),
            QuantizerOption::BlockSize => self.block_size.is_some(),
        }
    }

    /// Errors when an option the platform does not honour was set: a platform lists what it
    /// honours, so an option added later is refused by every platform that does not know it,
    /// never silently ignored.
    pub fn honour_only(&self, platform: &str, honoured: &[QuantizerOption]) -> Result<()> {
        // `hqq` calibrates block-wise weights: only a platform that has them (it honours a block
        // size) can use it; refused here, before calibration, not when an activation meets it.
        if self.observer == Some(mppq_ir::quant::ObserverKind::Hqq) && !honoured.contains(&QuantizerOption::BlockSize) {
            return Err(ApiError::Setting(format!(
                "platform `{platform}`: observer `hqq` calibrates block-wise weights only; use it with the `weight-only` platform"
            )));
        }
        match QuantizerOption::ALL.into_iter().find(|o| self.is_set(*o) && !honoured.contains(o)) {
            Some(option) => {
                let hint = match option {
                    QuantizerOption::BlockSize => "block-wise weights are the `weight-only` platform's",
                    QuantizerOption::Bits if honoured.contains(&QuantizerOption::BlockSize) => {
                        "its activations stay float (`weight_bits` sets the weights')"
                    }
                    _ => "use the `lowbit` platform (or your own) to choose it",
                };
                Err(ApiError::Setting(format!("platform `{platform}` has a fixed `{}`; {hint}", option.key())))
            }
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
    /// Reads a model: by default with the parser registry ([`crate::platform::parser`]: ONNX, Caffe, and
    /// the user's); `weights` is the separate weights file of formats that have one.
    fn parse(&self, path: &Path, weights: Option<&Path>) -> Result<Model> {
        crate::platform::parser::parse_model(path, weights)
    }
    /// The CPU class whose integer arithmetic the quantizer made for `options` fits (ONNX
    /// Runtime's CPU platforms); `None` for platforms of other runtimes.
    fn target_cpu(&self, _options: &QuantizerOptions) -> Option<mppq_quant::quantizer::TargetCpu> {
        None
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
