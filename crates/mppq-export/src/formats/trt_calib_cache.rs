//! `trt-calib-cache`: TensorRT's INT8 calibration cache (`calibration.cache`), the file an
//! `IInt8Calibrator`'s `readCalibrationCache` hands to the builder for implicit quantization
//! (TensorRT ≤ 10.x): a header line `TRT-<version>-EntropyCalibration2`, then one line per
//! activation, `name: <hex>`, the big-endian hex of the float32 scale (`amax / 127`; see
//! [`crate::ranges::Row::amax`]: the scale itself for our symmetric int8 grids). Only
//! per-tensor 8-bit activations are listed; weights TensorRT quantizes itself. Option
//! `version` (default 8601) is the number in the header; TensorRT warns when it differs from its own.

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, parse_options, write_file};
use crate::ranges::{ImportedValue, rows};
use mppq_ir::Model;
use std::fmt::Write as _;
use std::path::Path;

pub struct TrtCalibCache;

/// The file name the `trt-calib-cache` exporter writes.
pub const FILE: &str = "calibration.cache";

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Options {
    version: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self { version: 8601 }
    }
}

impl Exporter for TrtCalibCache {
    fn name(&self) -> &str {
        "trt-calib-cache"
    }
    fn description(&self) -> &str {
        "TensorRT's INT8 calibration cache (calibration.cache): hex float32 scale per activation, for implicit quantization"
    }
    fn default_options(&self) -> ExportOptions {
        serde_json::json!({"version": Options::default().version})
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<Options>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        let options: Options = parse_options(self.name(), options)?;
        let mut text = format!("TRT-{}-EntropyCalibration2\n", options.version);
        for row in
            rows(model)?.into_iter().filter(|r| !r.is_param && !r.is_fused() && r.is_integer() && r.entry.bits == 8)
        {
            let Some(amax) = row.amax() else { continue };
            let _ = writeln!(text, "{}: {:08x}", row.name, ((amax / 127.0) as f32).to_bits());
        }
        let path = dir.join(FILE);
        write_file(&path, text.as_bytes())?;
        Ok(vec![Artifact::new("TensorRT calibration cache", path)])
    }
}

/// A TensorRT calibration cache: its first line starts with `TRT-`.
pub(crate) fn sniff(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.starts_with("TRT-"))
}

/// Each `name: hex` line as the symmetric range `±127·scale`.
pub(crate) fn read(text: &str) -> std::result::Result<Vec<ImportedValue>, String> {
    text.lines()
        .enumerate()
        .skip(1)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let (name, hex) = line.rsplit_once(':').ok_or_else(|| format!("line {}: expected `name: hex`", i + 1))?;
            let bits = u32::from_str_radix(hex.trim(), 16)
                .map_err(|e| format!("line {}: `{}` is not 8 hex digits: {e}", i + 1, hex.trim()))?;
            let amax = (f64::from(f32::from_bits(bits)) * 127.0) as f32;
            Ok(ImportedValue::Range { name: name.trim().to_string(), min: -amax, max: amax })
        })
        .collect()
}
