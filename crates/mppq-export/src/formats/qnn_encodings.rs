//! `qnn-encodings`: the encodings file of Qualcomm's QNN/SNPE converters and AIMET
//! (`model.encodings`), schema 1.0.0: `activation_encodings` and `param_encodings` as lists of
//! `{name, dtype, enc_type, is_sym, bw, scale[], offset[]}`. QNN dequantizes an unsigned code as
//! `x = (q + offset) · scale`, so `offset` is the **negated** zero point of the unsigned grid: a
//! uint8 tensor with zero point 128 has offset −128, and a signed (symmetric) int8 one, whose
//! codes QNN shifts by 128, has offset −128 too (PPQ's QNN exporter wrote the zero point itself).
//! FP8 configs are written as `dtype: FLOAT` with their width only (the format has no scale for
//! them). Read back (`--import-ranges`): schemas 0.6.1, 1.0.0 and 2.0.0 (ONNX's
//! `y_scale`/`y_zero_point` convention).

use crate::error::{ExportError, Result};
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
use crate::ranges::{Imported, ImportedValue, Row, rows};
use mppq_ir::Model;
use serde_json::{Value, json};
use std::path::Path;

pub struct QnnEncodings;

/// The file name the `qnn-encodings` exporter writes.
pub const FILE: &str = "model.encodings";

impl Exporter for QnnEncodings {
    fn name(&self) -> &str {
        "qnn-encodings"
    }
    fn description(&self) -> &str {
        "QNN/SNPE/AIMET encodings, schema 1.0.0 (model.encodings): scale and offset (negated zero point) per tensor"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let (mut activations, mut params) = (Vec::new(), Vec::new());
        let (mut activation_bits, mut param_bits, mut per_channel, mut param_sym) = (0, 0, false, true);
        for row in rows(model)?.into_iter().filter(|r| !r.is_fused()) {
            let encoding = encoding(&row);
            if row.is_param {
                if row.entry.bits <= 16 {
                    param_bits = param_bits.max(row.entry.bits);
                    per_channel |= row.entry.scale.len() > 1;
                    param_sym &= row.entry.policy.is_symmetric();
                }
                params.push(encoding);
            } else {
                activation_bits = activation_bits.max(row.entry.bits);
                activations.push(encoding);
            }
        }
        let file = json!({
            "version": "1.0.0",
            "activation_encodings": activations,
            "param_encodings": params,
            "excluded_layers": [],
            "quantizer_args": {
                "activation_bitwidth": activation_bits,
                "dtype": "int",
                "is_symmetric": param_sym,
                "param_bitwidth": param_bits,
                "per_channel_quantization": per_channel,
                "quant_scheme": "post_training_tf",
            },
        });
        let text = serde_json::to_string_pretty(&file).map_err(|e| ExportError::Setting(e.to_string()))?;
        let path = dir.join(FILE);
        write_file(&path, text.as_bytes())?;
        Ok(vec![Artifact::new("QNN encodings", path)])
    }
}

/// How far QNN shifts a signed grid's codes to make them unsigned: `2^(bits-1)`, else 0.
fn unsigned_shift(bits: u32, signed: bool) -> f64 {
    if signed { (1u64 << (bits - 1)) as f64 } else { 0.0 }
}

fn encoding(row: &Row) -> Value {
    let e = &row.entry;
    if !row.is_integer() {
        return json!({"name": row.name, "dtype": "FLOAT", "enc_type": "PER_TENSOR", "bw": e.bits});
    }
    let shift = unsigned_shift(e.bits, e.quant_min < 0);
    let offsets: Vec<i64> = e.zero_point.iter().map(|z| -(f64::from(*z) + shift) as i64).collect();
    let enc_type = if e.scale.len() > 1 { "PER_CHANNEL" } else { "PER_TENSOR" };
    json!({
        "name": row.name,
        "dtype": "INT",
        "enc_type": enc_type,
        "is_sym": e.policy.is_symmetric(),
        "bw": e.bits,
        "scale": e.scale,
        "offset": offsets,
    })
}

/// An encodings file: a JSON object with a `version` and activation/param encodings (≤ 1.0.0)
/// or `encodings` (2.x).
pub(crate) fn sniff(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| {
        v.get("activation_encodings").is_some() || v.get("param_encodings").is_some() || v.get("encodings").is_some()
    })
}

pub(crate) fn read(text: &str) -> std::result::Result<Vec<ImportedValue>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let version = v.get("version").and_then(Value::as_str).unwrap_or("0.6.1");
    let mut out = Vec::new();
    match version.split('.').next() {
        Some("0") => {
            for section in ["activation_encodings", "param_encodings"] {
                let Some(map) = v.get(section).and_then(Value::as_object) else { continue };
                for (name, list) in map {
                    out.extend(read_v0(name, list).map_err(|m| format!("{section} `{name}`: {m}"))?);
                }
            }
        }
        Some("1") => {
            for section in ["activation_encodings", "param_encodings"] {
                let Some(list) = v.get(section).and_then(Value::as_array) else { continue };
                for e in list {
                    out.extend(read_v1(e).map_err(|m| format!("{section}: {m}"))?);
                }
            }
        }
        Some("2") => {
            let list = v.get("encodings").and_then(Value::as_array).ok_or("version 2 without an `encodings` list")?;
            for e in list {
                out.push(read_v2(e)?);
            }
        }
        _ => return Err(format!("version `{version}`: mppq reads 0.6.1, 1.0.0 and 2.x")),
    }
    Ok(out)
}

fn field<'a>(e: &'a Value, key: &str) -> std::result::Result<&'a Value, String> {
    e.get(key).ok_or_else(|| format!("an encoding has no `{key}`"))
}

fn floats(v: &Value) -> std::result::Result<Vec<f32>, String> {
    match v {
        Value::Array(items) => {
            items.iter().map(|x| x.as_f64().map(|x| x as f32).ok_or("not a number".to_string())).collect()
        }
        x => x.as_f64().map(|x| vec![x as f32]).ok_or_else(|| format!("`{x}` is not a number")),
    }
}

fn bits_of(v: &Value) -> std::result::Result<u32, String> {
    v.as_u64()
        .and_then(|b| u32::try_from(b).ok())
        .filter(|b| (2..=32).contains(b))
        .ok_or_else(|| format!("bit width `{v}` is not 2 to 32"))
}

/// QNN offsets as the zero points of QNN's unsigned grid (`-offset`); applying them shifts to
/// the model's own grid.
fn unsigned_grid(name: String, scale: Vec<f32>, offset: &[f32], bits: u32) -> ImportedValue {
    let zero_point = offset.iter().map(|o| -o).collect();
    ImportedValue::Grid(Imported { name, scale, zero_point, bits: Some(bits), signed: Some(false) })
}

/// 0.6.1: `name: [{bitwidth, dtype, is_symmetric, offset, scale, min, max}]`, one dict per
/// channel.
fn read_v0(name: &str, list: &Value) -> std::result::Result<Option<ImportedValue>, String> {
    let list = list.as_array().ok_or("not a list")?;
    let Some(first) = list.first() else { return Ok(None) };
    if field(first, "dtype").ok().and_then(Value::as_str).is_some_and(|d| d.eq_ignore_ascii_case("float")) {
        return Ok(Some(ImportedValue::Float { name: name.to_string() }));
    }
    let bits = bits_of(field(first, "bitwidth")?)?;
    let (mut scale, mut offset) = (Vec::new(), Vec::new());
    for e in list {
        scale.extend(floats(field(e, "scale")?)?);
        offset.extend(floats(field(e, "offset")?)?);
    }
    Ok(Some(unsigned_grid(name.to_string(), scale, &offset, bits)))
}

/// 1.0.0: `{name, dtype, enc_type, is_sym, bw, scale[], offset[]}`.
fn read_v1(e: &Value) -> std::result::Result<Option<ImportedValue>, String> {
    let name = field(e, "name")?.as_str().ok_or("`name` is not a string")?.to_string();
    if field(e, "dtype")?.as_str().is_some_and(|d| d.eq_ignore_ascii_case("float")) {
        return Ok(Some(ImportedValue::Float { name }));
    }
    let bits = bits_of(field(e, "bw")?)?;
    let scale = floats(field(e, "scale")?).map_err(|m| format!("`{name}`: scale: {m}"))?;
    let offset = floats(field(e, "offset")?).map_err(|m| format!("`{name}`: offset: {m}"))?;
    if scale.len() != offset.len() {
        return Err(format!("`{name}`: {} scales but {} offsets", scale.len(), offset.len()));
    }
    Ok(Some(unsigned_grid(name, scale, &offset, bits)))
}

/// 2.x: `{name, output_dtype, y_scale, y_zero_point?, axis?}`, ONNX's convention.
fn read_v2(e: &Value) -> std::result::Result<ImportedValue, String> {
    let name = field(e, "name")?.as_str().ok_or("`name` is not a string")?.to_string();
    let dtype = field(e, "output_dtype")?.as_str().ok_or_else(|| format!("`{name}`: output_dtype is not a string"))?;
    if dtype.starts_with("float") {
        return Ok(ImportedValue::Float { name });
    }
    let (signed, digits) = match dtype.strip_prefix('u') {
        Some(rest) => (false, rest),
        None => (true, dtype),
    };
    let bits = digits
        .strip_prefix("int")
        .and_then(|b| b.parse::<u32>().ok())
        .ok_or_else(|| format!("`{name}`: output_dtype `{dtype}` is not an integer or float type"))?;
    let scale = floats(field(e, "y_scale")?).map_err(|m| format!("`{name}`: y_scale: {m}"))?;
    let zero_point = match e.get("y_zero_point") {
        Some(z) => floats(z).map_err(|m| format!("`{name}`: y_zero_point: {m}"))?,
        None => vec![0.0; scale.len()],
    };
    if scale.len() != zero_point.len() {
        return Err(format!("`{name}`: {} scales but {} zero points", scale.len(), zero_point.len()));
    }
    Ok(ImportedValue::Grid(Imported { name, scale, zero_point, bits: Some(bits), signed: Some(signed) }))
}
