//! `ort-calib-cache`: ONNX Runtime's calibration cache (`calibration_cache.json`), the JSON that
//! `quantize_static(..., calibration_cache_path=...)` (ORT ≥ 1.31) saves and, when the file
//! exists, loads instead of calibrating. Written here, it makes ORT's quantizer (and tools that
//! read the same cache, such as ModelOpt) use our activation ranges: per quantized activation,
//! `lowest`/`highest` = the range our grid covers, `(qmin − zp)·s` and `(qmax − zp)·s`, from
//! which ORT's MinMax rule gives back our scale and zero point for asymmetric activations.
//! The outputs we fuse with the activation after them (Conv → Relu) are listed with the
//! activation's range: ORT's quantizer asks for them and then fuses the pair the same way.
//! Weights are not in it (ORT computes those itself), nor per-channel activations. The cache
//! says `MinMax`: call `quantize_static` with `calibrate_method=CalibrationMethod.MinMax`.
//! Read back by `--import-ranges` as `(min, max)` ranges.

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
use crate::ranges::{ImportedValue, rows};
use mppq_ir::Model;
use serde_json::{Value, json};
use std::path::Path;

pub struct OrtCalibCache;

/// The file name the `ort-calib-cache` exporter writes.
pub const FILE: &str = "calibration_cache.json";

impl Exporter for OrtCalibCache {
    fn name(&self) -> &str {
        "ort-calib-cache"
    }
    fn description(&self) -> &str {
        "ONNX Runtime's calibration cache (calibration_cache.json): activation ranges quantize_static loads instead of calibrating"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let path = dir.join(FILE);
        write_file(&path, to_json(model)?.to_string().as_bytes())?;
        Ok(vec![Artifact::new("ONNX Runtime calibration cache", path)])
    }
}

/// A float as ORT's cache encoder writes a numpy scalar array.
fn array(v: f32) -> Value {
    json!({"data": v, "dtype": "float32", "CLS": "numpy.array"})
}

fn to_json(model: &Model) -> Result<Value> {
    let mut data = serde_json::Map::new();
    for row in rows(model)?.into_iter().filter(|r| !r.is_param && r.is_integer()) {
        let [(lowest, highest)] = row.ranges()[..] else { continue };
        data.insert(row.name, json!({"lowest": array(lowest), "highest": array(highest), "CLS": "TensorData"}));
    }
    Ok(json!({
        "CLS": "TensorsData",
        "data": data,
        "calibration_method": {"CLS": "CalibrationMethod", "value": "CalibrationMethod.MinMax"},
        "smooth_quant": false,
    }))
}

/// An ORT calibration cache: a JSON object of class `TensorsData`.
pub(crate) fn sniff(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("CLS").and_then(Value::as_str) == Some("TensorsData"))
}

/// Each tensor's `lowest`/`highest` (a number, or a numpy array object holding one).
pub(crate) fn read(text: &str) -> std::result::Result<Vec<ImportedValue>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let data = v.get("data").and_then(Value::as_object).ok_or("no `data` object")?;
    let number = |t: &Value, key: &str, name: &str| -> std::result::Result<f32, String> {
        let x = t.get(key).ok_or_else(|| format!("tensor `{name}` has no `{key}`"))?;
        let x = x.get("data").unwrap_or(x);
        let x = match x.as_array().map(Vec::as_slice) {
            Some([one]) => one,
            Some(_) => {
                return Err(format!(
                    "tensor `{name}`: `{key}` holds a per-channel range; only per-tensor ones are read"
                ));
            }
            None => x,
        };
        x.as_f64().map(|x| x as f32).ok_or_else(|| format!("tensor `{name}`: `{key}` is not a number"))
    };
    data.iter()
        .map(|(name, t)| {
            Ok(ImportedValue::Range {
                name: name.clone(),
                min: number(t, "lowest", name)?,
                max: number(t, "highest", name)?,
            })
        })
        .collect()
}
