//! `trt-dynamic-range`: a JSON dynamic-range table, `{"act_quant_info": {name: amax}}`, as the
//! seeds' TensorRT exporter writes it; a build script sets each with
//! `ITensor::setDynamicRange(-amax, amax)`. `amax` as [`crate::ranges::Row::amax`] defines it
//! (`s · quant_max` for a symmetric grid; PPQ wrote `s · (qmax − qmin) / 2`, half a step more
//! for int8), for every per-tensor activation of any bit width (the low-bit TensorRT workflow
//! reads the same table).

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
use crate::ranges::{ImportedValue, rows};
use mppq_ir::Model;
use serde_json::{Value, json};
use std::path::Path;

pub struct TrtDynamicRange;

/// The file name the `trt-dynamic-range` exporter writes.
pub const FILE: &str = "dynamic_range.json";

impl Exporter for TrtDynamicRange {
    fn name(&self) -> &str {
        "trt-dynamic-range"
    }
    fn description(&self) -> &str {
        "TensorRT dynamic ranges as JSON (dynamic_range.json): {\"act_quant_info\": {tensor: amax}} for setDynamicRange"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let mut table = serde_json::Map::new();
        for row in rows(model)?.into_iter().filter(|r| !r.is_param && !r.is_fused() && r.is_integer()) {
            if let Some(amax) = row.amax() {
                table.insert(row.name, json!(amax));
            }
        }
        let path = dir.join(FILE);
        let text = serde_json::to_string_pretty(&json!({"act_quant_info": table}))
            .map_err(|e| crate::error::ExportError::Setting(e.to_string()))?;
        write_file(&path, text.as_bytes())?;
        Ok(vec![Artifact::new("TensorRT dynamic ranges", path)])
    }
}

/// A dynamic-range table: a JSON object with an `act_quant_info` object.
pub(crate) fn sniff(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("act_quant_info").is_some_and(Value::is_object))
}

/// Each `name: amax` as the range `[-amax, amax]`.
pub(crate) fn read(text: &str) -> std::result::Result<Vec<ImportedValue>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let table = v.get("act_quant_info").and_then(Value::as_object).ok_or("no `act_quant_info` object")?;
    table
        .iter()
        .map(|(name, amax)| {
            let amax = amax.as_f64().ok_or_else(|| format!("tensor `{name}`: the range is not a number"))? as f32;
            Ok(ImportedValue::Range { name: name.clone(), min: -amax, max: amax })
        })
        .collect()
}
