//! The quantization setting: every choice of a quantization run in one typed, serde-(de)serialised
//! struct — platform, dispatcher, quantizer options, ignored scope, calibration, each pass's knobs,
//! exporters and their options, and analysis. Read from TOML or JSON (`--setting FILE`); an unknown key is an
//! error that names it and the valid keys. Command-line flags override the file.

use crate::error::{ApiError, Result};
use crate::platform::QuantizerOptions;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Everything a quantization run needs besides the model and its calibration data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuantizeSetting {
    /// Target platform (`mppq platforms` lists them).
    pub platform: String,
    /// Dispatcher; the platform's own when `None`.
    pub dispatcher: Option<String>,
    /// Choices handed to the platform's quantizer.
    pub quantizer: QuantizerOptions,
    /// Operation types or name globs kept in FP32.
    pub ignore: Vec<String>,
    /// Compute device.
    pub device: DeviceKind,
    /// How calibration files become input tensors (batching, image preprocessing, raw shapes).
    pub data: crate::data::calib::DataSetting,
    /// Largest tensor (MiB) an operator may allocate from computed sizes (Tile, Pad, Expand,
    /// Conv, ...); larger is an error naming the node. Default: half the memory this process may
    /// use (physical memory, container limit, `ulimit -v`: the least).
    pub max_tensor_mib: Option<u64>,
    /// Most iterations one run of a Loop may take; larger is an error naming the node. Default:
    /// 1 000 000 (ONNX Runtime has no limit: a hostile trip count runs until stopped there).
    pub max_loop_iterations: Option<u64>,
    /// Pass pipeline knobs (fusion, calibration, alignment, baking, ...).
    pub pipeline: mppq_passes::PipelineSetting,
    /// Exporters to run (`mppq exporters` lists them); the platform's defaults when absent.
    pub exporters: Option<Vec<String>>,
    /// A range file of another tool (QNN/AIMET encodings 0.6.1/1.0.0/2.x, ONNX Runtime's
    /// calibration cache, TensorRT's calibration cache or dynamic-range JSON) whose values
    /// replace the calibrated ones of the tensors it names (`mppq_export::import`).
    pub import_ranges: Option<std::path::PathBuf>,
    /// The weights file of a model format that keeps them apart (Caffe's `.caffemodel`);
    /// `crate::platform::parser`.
    pub weights: Option<std::path::PathBuf>,
    /// Options per exporter: `[export.qdq]`, `[export.quant-json]`, … (see `crate::export`).
    pub export: BTreeMap<String, crate::export::ExportOptions>,
    /// Error analysis after quantization (graph-wise always; layer-wise on request).
    pub analysis: crate::report::AnalyseSetting,
    /// The accuracy budget: operations given back to float until the output SNR holds.
    pub budget: crate::quantize::budget::BudgetSetting,
}

impl Default for QuantizeSetting {
    fn default() -> Self {
        Self {
            platform: "default".into(),
            dispatcher: None,
            quantizer: QuantizerOptions::default(),
            ignore: Vec::new(),
            device: DeviceKind::Cpu,
            data: Default::default(),
            max_tensor_mib: None,
            max_loop_iterations: None,
            pipeline: Default::default(),
            exporters: None,
            import_ranges: None,
            weights: None,
            export: BTreeMap::new(),
            analysis: Default::default(),
            budget: Default::default(),
        }
    }
}

/// The compute device of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// Burn's `flex` CPU backend (with our CPU kernels).
    #[default]
    #[serde(alias = "flex")]
    #[value(alias = "flex")]
    Cpu,
    /// The default GPU adapter through wgpu (a build with `mppq-exec`'s `wgpu` feature).
    #[serde(alias = "gpu")]
    #[value(alias = "gpu")]
    Wgpu,
    /// Burn's `ndarray` CPU backend (a build with `mppq-exec`'s `ndarray` feature; deprecated
    /// upstream, slower than `cpu`: none of our CPU kernels run on it).
    Ndarray,
}

impl DeviceKind {
    /// The device; `wgpu` in a build without the GPU backend is an error that says so.
    pub fn device(self) -> Result<mppq_exec::Device> {
        match self {
            Self::Cpu => Ok(mppq_exec::Device::cpu()),
            Self::Wgpu => mppq_exec::Device::by_name("wgpu").ok_or_else(|| {
                ApiError::Setting(
                    "device `wgpu`: this build has no GPU backend (build with the `wgpu` feature of mppq-exec)".into(),
                )
            }),
            Self::Ndarray => mppq_exec::Device::by_name("ndarray").ok_or_else(|| {
                ApiError::Setting(
                    "device `ndarray`: this build has no ndarray backend (build with the `ndarray` feature of mppq-exec)"
                        .into(),
                )
            }),
        }
    }
}

impl QuantizeSetting {
    /// Reads a setting file: `.toml` or `.json` by extension.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ApiError::Io { path: path.display().to_string(), source })?;
        let bad = |m: String| ApiError::Setting(format!("{}: {m}", path.display()));
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => toml::from_str(&text).map_err(|e| bad(e.to_string())),
            Some("json") => serde_json::from_str(&text).map_err(|e| bad(e.to_string())),
            _ => Err(bad("a setting file is .toml or .json".into())),
        }
    }

    /// Checks every value serde cannot, whatever the setting came from (a file, flags, code):
    /// before any work, each error names the key and the fix.
    pub fn validate(&self) -> Result<()> {
        if self.max_tensor_mib == Some(0) {
            return Err(ApiError::Setting(
                "max_tensor_mib = 0: use at least 1, or leave it out for the default (half the memory this process \
                 may use)"
                    .into(),
            ));
        }
        if self.max_loop_iterations == Some(0) {
            return Err(ApiError::Setting(
                "max_loop_iterations = 0: use at least 1, or leave it out for the default".into(),
            ));
        }
        if self.exporters.as_ref().is_some_and(Vec::is_empty) {
            return Err(ApiError::Setting(
                "exporters = []: nothing would be written; name at least one (`mppq exporters`), or leave the key \
                 out for the platform's"
                    .into(),
            ));
        }
        if self.analysis.batches == Some(0) {
            // It used to be raised to 1 without a word.
            return Err(ApiError::Setting(
                "analysis.batches = 0: the analysis needs at least one batch (leave it out for 4)".into(),
            ));
        }
        self.budget.validate()?;
        self.pipeline.validate()?;
        Ok(())
    }

    /// This setting with `patch` laid over it: each key of `patch` replaces the same key here,
    /// tables merge key by key (what the Python binding's keyword arguments and setting dicts
    /// do to a setting file). Unknown keys and wrong types are refused as in a setting file.
    pub fn with_patch(&self, patch: &serde_json::Value) -> Result<Self> {
        fn lay_over(base: &mut serde_json::Value, patch: &serde_json::Value) {
            match (base, patch) {
                (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
                    for (key, value) in patch {
                        lay_over(base.entry(key.clone()).or_insert(serde_json::Value::Null), value);
                    }
                }
                (base, patch) => *base = patch.clone(),
            }
        }
        let mut merged = serde_json::to_value(self).map_err(|e| ApiError::Setting(e.to_string()))?;
        lay_over(&mut merged, patch);
        let setting: Self = serde_json::from_value(merged).map_err(|e| ApiError::Setting(e.to_string()))?;
        setting.validate()?;
        Ok(setting)
    }

    /// The setting as TOML (what `mppq quantize --print-setting` shows).
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string_pretty(self).map_err(|e| ApiError::Setting(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_replaces_keys_and_merges_tables() {
        let base = QuantizeSetting { platform: "lowbit".into(), ..Default::default() };
        let patched =
            base.with_patch(&serde_json::json!({"pipeline": {"optimize": 2}, "ignore": ["Softmax"]})).unwrap();
        assert_eq!(patched.platform, "lowbit");
        assert_eq!(patched.pipeline.optimize, 2);
        assert_eq!(patched.ignore, vec!["Softmax".to_string()]);
        assert_eq!(patched.pipeline.calibration, base.pipeline.calibration);
        let unknown = base.with_patch(&serde_json::json!({"pipeline": {"optimise": 2}})).unwrap_err().to_string();
        assert!(unknown.contains("unknown field `optimise`"), "{unknown}");
    }

    #[test]
    fn toml_and_json_round_trip() {
        let mut s = QuantizeSetting {
            platform: "lowbit".into(),
            ignore: vec!["Softmax".into()],
            exporters: Some(vec!["qdq".into()]),
            ..Default::default()
        };
        s.quantizer.bits = Some(4);
        s.data.image.resize = Some("256".into());
        s.data.image.mean = vec![0.485, 0.456, 0.406];
        s.data.input_shape.insert("x".into(), vec![1, 3, 224, 224]);
        s.export.insert("qdq".into(), serde_json::json!({"weights_as_integers": false, "min_opset": 17}));
        let dir = tempfile::tempdir().unwrap();
        let toml_path = dir.path().join("s.toml");
        std::fs::write(&toml_path, s.to_toml().unwrap()).unwrap();
        assert_eq!(QuantizeSetting::from_file(&toml_path).unwrap(), s);
        let json_path = dir.path().join("s.json");
        std::fs::write(&json_path, serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(QuantizeSetting::from_file(&json_path).unwrap(), s);
    }

    #[test]
    fn unknown_keys_are_named_with_the_valid_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, "platform = \"default\"\n[quantizer]\nbitz = 4\n").unwrap();
        let err = QuantizeSetting::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("bitz") && err.contains("weight_bits"), "{err}");
        std::fs::write(&path, "platfrom = \"default\"\n").unwrap();
        let err = QuantizeSetting::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("platfrom") && err.contains("dispatcher"), "{err}");
        // A partial file keeps the defaults for everything else.
        std::fs::write(&path, "[analysis]\nlayerwise = true\n").unwrap();
        let s = QuantizeSetting::from_file(&path).unwrap();
        assert!(s.analysis.layerwise && s.platform == "default");
    }
}
