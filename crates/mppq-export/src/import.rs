//! Importing ranges calibrated by another tool: [`read_ranges`] recognises a range file by its
//! content (each format's reader lives with its writer in [`crate::formats`]), [`apply_imported`]
//! puts the values on a quantized graph, and the [`ImportRanges`] pass does so in the pipeline,
//! right after calibration.

use crate::error::{ExportError, Result};
use crate::formats::{ort_calib_cache, qnn_encodings, trt_calib_cache, trt_dynamic_range};
use crate::ranges::ImportedValue;
use mppq_ir::Graph;
use mppq_ir::quant::{QuantizationState, TensorQuantConfig, config_at_mut};
use std::path::Path;

/// A format that can be read back: its name, a test of whether a file is one, and the reader.
struct Reader {
    name: &'static str,
    sniff: fn(&str) -> bool,
    read: fn(&str) -> std::result::Result<Vec<ImportedValue>, String>,
}

/// Every readable format (one line each).
const READERS: &[Reader] = &[
    Reader { name: "qnn-encodings", sniff: qnn_encodings::sniff, read: qnn_encodings::read },
    Reader { name: "ort-calib-cache", sniff: ort_calib_cache::sniff, read: ort_calib_cache::read },
    Reader { name: "trt-calib-cache", sniff: trt_calib_cache::sniff, read: trt_calib_cache::read },
    Reader { name: "trt-dynamic-range", sniff: trt_dynamic_range::sniff, read: trt_dynamic_range::read },
];

/// Reads a range file of any readable format (recognised by its content); returns the format's
/// name and the ranges.
pub fn read_ranges(path: &Path) -> Result<(&'static str, Vec<ImportedValue>)> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ExportError::Io { path: path.display().to_string(), source })?;
    let Some(reader) = READERS.iter().find(|r| (r.sniff)(&text)) else {
        let names: Vec<&str> = READERS.iter().map(|r| r.name).collect();
        return Err(ExportError::data(
            path,
            format!("is not a range file mppq reads (formats: {}); see docs/platforms.md", names.join(", ")),
        ));
    };
    let bad = |m: String| ExportError::data(path, format!("{} file: {m}", reader.name));
    if let Some(key) = duplicate_json_key(&text) {
        return Err(bad(format!("`{key}` appears twice in one object (which one is meant?): keep one")));
    }
    let values = (reader.read)(&text).map_err(bad)?;
    if values.is_empty() {
        return Err(ExportError::data(path, format!("{} file lists no tensor", reader.name)));
    }
    let mut seen = std::collections::HashSet::new();
    for value in &values {
        if !seen.insert(value.name()) {
            return Err(bad(format!("tensor `{}` is listed twice (which one is meant?): keep one", value.name())));
        }
        check_value(value).map_err(|m| bad(format!("tensor `{}`: {m}", value.name())))?;
    }
    Ok((reader.name, values))
}

/// What no grid can be made of, whatever the model: a range that is not a finite interval or
/// has no width once zero is inside (TensorRT's scale `00000000`), a scale that is not positive.
fn check_value(value: &ImportedValue) -> std::result::Result<(), String> {
    match value {
        ImportedValue::Range { min, max, .. } => {
            if !(min.is_finite() && max.is_finite() && min <= max) {
                return Err(format!("range [{min}, {max}] is not a finite interval"));
            }
            if min.abs().max(max.abs()) == 0.0 {
                return Err(format!(
                    "range [{min}, {max}] has no width, so no scale covers it: remove the entry to calibrate the tensor"
                ));
            }
        }
        ImportedValue::Grid(g) => {
            if let Some(bad) = g.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
                return Err(format!("scale {bad} is not a positive finite number"));
            }
            if let Some(bad) = g.zero_point.iter().find(|z| !z.is_finite()) {
                return Err(format!("zero point {bad} is not a finite number"));
            }
        }
        ImportedValue::Float { .. } => {}
    }
    Ok(())
}

/// The first key that appears twice in one object of a JSON text (serde's maps keep the last
/// silently); `None` for other texts.
fn duplicate_json_key(text: &str) -> Option<String> {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    /// Any JSON value, checked for repeated keys on the way.
    struct Unique;
    impl<'de> Deserialize<'de> for Unique {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            d.deserialize_any(UniqueVisitor)
        }
    }
    struct UniqueVisitor;
    impl<'de> Visitor<'de> for UniqueVisitor {
        type Value = Unique;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_unit<E>(self) -> std::result::Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Unique, A::Error> {
            while seq.next_element::<Unique>()?.is_some() {}
            Ok(Unique)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Unique, A::Error> {
            let mut keys = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !keys.insert(key.clone()) {
                    return Err(serde::de::Error::custom(format!("{DUPLICATE}{key}")));
                }
                map.next_value::<Unique>()?;
            }
            Ok(Unique)
        }
    }
    const DUPLICATE: &str = "duplicate key: ";
    let err = serde_json::from_str::<Unique>(text).err()?;
    let message = err.to_string();
    let key = message.strip_prefix(DUPLICATE)?;
    // serde_json appends " at line L column C".
    Some(key.rsplit_once(" at line ").map_or(key, |(k, _)| k).to_string())
}

/// What [`apply_imported`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportReport {
    /// Tensors whose configs took the file's values.
    pub applied: usize,
    /// Names in the file that are no quantized tensor of the model.
    pub unknown: Vec<String>,
    /// Tensors the file keeps in floating point that this model quantizes.
    pub quantized_but_float_in_file: Vec<String>,
    /// Quantized activations of the model the file does not cover (they keep their calibration).
    pub uncovered: Vec<String>,
}

/// Puts imported ranges on every active config of each named tensor (its producer's output and
/// its readers' inputs). A grid must match the config's bits, signedness and channel count; a
/// `(min, max)` range is fitted to the config's own grid as calibration would. Nothing changes
/// when any tensor does not fit (the error names it).
pub fn apply_imported(graph: &mut Graph, values: &[ImportedValue]) -> Result<ImportReport> {
    let mut staged: Vec<(mppq_ir::quant::ConfigLocation, TensorQuantConfig)> = Vec::new();
    let mut report = ImportReport::default();
    for value in values {
        let Some(var) = graph.var_id(value.name()) else {
            report.unknown.push(value.name().to_string());
            continue;
        };
        let locations = active_locations(graph, var);
        if locations.is_empty() {
            report.unknown.push(value.name().to_string());
            continue;
        }
        if let ImportedValue::Float { name } = value {
            report.quantized_but_float_in_file.push(name.clone());
            continue;
        }
        for loc in locations {
            let Some(current) = mppq_ir::quant::config_at(graph, loc) else { continue };
            let mut config = current.clone();
            let bad = |m: String| ExportError::Setting(format!("imported ranges: tensor `{}`: {m}", value.name()));
            fit(&mut config, value).map_err(bad)?;
            agrees_with_calibration(current, &config).map_err(bad)?;
            staged.push((loc, config));
        }
        report.applied += 1;
    }
    let covered: std::collections::HashSet<&str> = values.iter().map(ImportedValue::name).collect();
    report.uncovered = activation_names(graph).into_iter().filter(|n| !covered.contains(n.as_str())).collect();
    for (loc, config) in staged {
        if let Some(slot) = config_at_mut(graph, loc) {
            *slot = config;
        }
    }
    mppq_ir::quant::sync_dominated(graph)?;
    Ok(report)
}

/// The configs that own the parameters `var` is quantized with: its producer's output and its
/// readers' inputs, each followed to the config it shares its parameters with (`dominated_by`,
/// e.g. a MaxPool's output takes its input's), active and not fused into an activation.
fn active_locations(graph: &Graph, var: mppq_ir::VarId) -> Vec<mppq_ir::quant::ConfigLocation> {
    use mppq_ir::quant::ConfigLocation;
    let slots = mppq_ir::quant::tensor_slots(graph, var);
    let mut out: Vec<ConfigLocation> = Vec::new();
    for loc in slots {
        let usable = |loc| {
            mppq_ir::quant::config_at(graph, loc).is_some_and(|c| {
                (c.state.is_active() || c.state.is_baked()) && c.state != QuantizationState::Overlapped
            })
        };
        if !usable(loc) {
            continue;
        }
        let Ok(root) = mppq_ir::quant::dominator_root(graph, loc) else { continue };
        if usable(root) && !out.contains(&root) {
            out.push(root);
        }
    }
    out
}

/// Names of the quantized activations of `graph` (non-initializers with an active config).
fn activation_names(graph: &Graph) -> Vec<String> {
    let mut names = Vec::new();
    for (id, var) in graph.variables() {
        if var.value.is_none() && !active_locations(graph, id).is_empty() {
            names.push(var.name.clone());
        }
    }
    names
}

/// Sets `config`'s scale and zero point from `value`, or says why they do not fit.
fn fit(config: &mut TensorQuantConfig, value: &ImportedValue) -> std::result::Result<(), String> {
    if config.exponent_bits != 0 {
        return Err("the model's config is a floating-point (FP8) one; range files carry integer grids".into());
    }
    match value {
        ImportedValue::Grid(g) => {
            if let Some(bits) = g.bits.filter(|b| *b != config.num_of_bits) {
                return Err(format!("the file has {bits} bits, the model's config {}", config.num_of_bits));
            }
            // The same real values on the config's grid: int8 code q is uint8 code q + 128.
            let config_signed = config.quant_min < 0;
            let half = (1u64 << (config.num_of_bits.min(32) - 1)) as f32;
            let shift = match g.signed {
                Some(true) if !config_signed => half,
                Some(false) if config_signed => -half,
                _ => 0.0,
            };
            let zero_point: Vec<f32> = g.zero_point.iter().map(|z| z + shift).collect();
            let channels = config.scale.len().max(1);
            if g.scale.len() != channels {
                return Err(format!("{} scale(s) in the file, {channels} in the model's config", g.scale.len()));
            }
            let (lo, hi) = (config.quant_min as f32, config.quant_max as f32);
            if let Some(z) = zero_point.iter().find(|z| !(z.fract() == 0.0 && (lo..=hi).contains(*z))) {
                return Err(format!("zero point {z} (on the model's grid) is not an integer in [{lo}, {hi}]"));
            }
            if g.zero_point.len() != g.scale.len() {
                return Err(format!("{} scales but {} zero points", g.scale.len(), g.zero_point.len()));
            }
            config.scale = g.scale.clone();
            config.offset = zero_point;
        }
        ImportedValue::Range { min, max, .. } => {
            if config.scale.len() > 1 {
                return Err("a per-tensor range for a per-channel config".into());
            }
            let (scale, zero_point) = grid_of(config, *min, *max);
            config.scale = vec![scale];
            config.offset = vec![zero_point];
        }
        ImportedValue::Float { .. } => return Err("the file keeps it in floating point".into()),
    }
    Ok(())
}

/// Refuses an imported grid on which the tensor's calibrated values would take almost no codes:
/// fewer than 1/32 of the grid's codes (and at least 2) between the calibrated range and the
/// imported one. A range of 1e38, or a negative range on a ReLU output, meant another tensor or
/// another model; quantizing with it would turn the tensor into a constant.
fn agrees_with_calibration(
    calibrated: &TensorQuantConfig,
    imported: &TensorQuantConfig,
) -> std::result::Result<(), String> {
    let range = |c: &TensorQuantConfig, i: usize| {
        let (s, z) = (f64::from(c.scale[i]), f64::from(c.offset.get(i).copied().unwrap_or(0.0)));
        ((c.quant_min as f64 - z) * s, (c.quant_max as f64 - z) * s)
    };
    let levels = (imported.quant_max - imported.quant_min) as f64 + 1.0;
    let least_codes = (levels / 32.0).max(2.0);
    let usable = |c: &TensorQuantConfig| c.scale.iter().all(|s| s.is_finite() && *s > 0.0);
    if !usable(calibrated) || calibrated.scale.len() != imported.scale.len() {
        return Ok(());
    }
    for i in 0..imported.scale.len() {
        let (c_lo, c_hi) = range(calibrated, i);
        let (n_lo, n_hi) = range(imported, i);
        // A tensor calibrated as constant (its scale floored near 2^-24) has nothing to compare with.
        if calibrated.scale[i] < 1e-6 {
            continue;
        }
        let overlap = (c_hi.min(n_hi) - c_lo.max(n_lo)).max(0.0);
        let codes = overlap / f64::from(imported.scale[i]);
        if codes < least_codes {
            return Err(format!(
                "the file's grid [{n_lo:.6e}, {n_hi:.6e}] leaves the calibrated values [{c_lo:.6e}, {c_hi:.6e}] \
                 {codes:.1} of its {levels} codes (the tensor would be quantized to a constant): the file is for \
                 another model or tensor; fix or remove the entry"
            ));
        }
    }
    Ok(())
}

/// The scale and zero point of `config`'s grid that cover `[min, max]` (with 0 inside), as our
/// min/max observer sets them: symmetric `absmax / quant_max`, asymmetric
/// `(max − min) / (quant_max − quant_min)` with the rounded zero point (in f64, so a range
/// written from a grid gives that grid back).
fn grid_of(config: &TensorQuantConfig, min: f32, max: f32) -> (f32, f32) {
    let (lo, hi) = (config.quant_min as f64, config.quant_max as f64);
    let (min, max) = (f64::from(min).min(0.0), f64::from(max).max(0.0));
    let (scale, zero_point) = if config.policy.is_symmetric() {
        let mid = if lo < 0.0 { 0.0 } else { ((lo + hi) / 2.0).round() };
        (min.abs().max(max) / (hi - mid), mid)
    } else {
        let scale = (max - min) / (hi - lo);
        (scale, (lo - min / scale).round().clamp(lo, hi))
    };
    let scale = scale as f32;
    (if scale > 0.0 && scale.is_finite() { scale } else { f32::EPSILON }, zero_point as f32)
}

/// The pass that puts a range file's values on the calibrated configs (`import_ranges` in the
/// setting, `--import-ranges FILE`): right after calibration, so alignment and the passes after
/// it treat imported ranges like calibrated ones. Tensors the file does not cover keep their
/// calibration; a file whose names match no quantized tensor is an error.
pub struct ImportRanges {
    pub file: std::path::PathBuf,
    pub format: &'static str,
    pub values: Vec<ImportedValue>,
}

impl mppq_passes::Pass for ImportRanges {
    fn name(&self) -> &'static str {
        "import_ranges"
    }

    fn run(&mut self, ctx: &mut mppq_passes::PassContext<'_>) -> mppq_passes::Result<mppq_passes::PassReport> {
        let invalid = |message: String| mppq_passes::PassError::Invalid { pass: "import_ranges", message };
        let report =
            apply_imported(ctx.graph, &self.values).map_err(|e| invalid(format!("{}: {e}", self.file.display())))?;
        if let Some(first) = report.quantized_but_float_in_file.first() {
            return Err(invalid(format!(
                "{}: the file keeps {} tensor(s) in floating point that this run quantizes (e.g. `{first}`): add \
                 their producers to `--ignore` (`mppq info` lists the names), or remove the entries",
                self.file.display(),
                report.quantized_but_float_in_file.len()
            )));
        }
        if report.applied == 0 {
            let some: Vec<&str> = report.unknown.iter().take(5).map(String::as_str).collect();
            return Err(invalid(format!(
                "{}: none of its {} tensor names (e.g. {}) is a quantized tensor of this model; the names must be those \
                 of the model being quantized, after BN folding (see model.float.onnx)",
                self.file.display(),
                self.values.len(),
                some.join(", ")
            )));
        }
        let mut summary = format!("{} tensors from {} ({})", report.applied, self.file.display(), self.format);
        if let Some(first) = report.unknown.first() {
            summary += &format!("; {} names not in the model (e.g. `{first}`)", report.unknown.len());
        }
        if let Some(first) = report.uncovered.first() {
            summary += &format!("; {} activations kept their calibration (e.g. `{first}`)", report.uncovered.len());
        }
        Ok(mppq_passes::PassReport::new("import_ranges", report.applied, summary))
    }
}
