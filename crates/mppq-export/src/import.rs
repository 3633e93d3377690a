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
    let values = (reader.read)(&text).map_err(|m| ExportError::data(path, format!("{} file: {m}", reader.name)))?;
    if values.is_empty() {
        return Err(ExportError::data(path, format!("{} file lists no tensor", reader.name)));
    }
    Ok((reader.name, values))
}

/// What [`apply_imported`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportReport {
    /// Tensors whose configs took the file's values.
    pub applied: usize,
    /// Names in the file that are no quantized tensor of the model.
    pub unknown: Vec<String>,
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
        for loc in locations {
            let Some(current) = mppq_ir::quant::config_at(graph, loc) else { continue };
            let mut config = current.clone();
            fit(&mut config, value)
                .map_err(|m| ExportError::Setting(format!("imported ranges: tensor `{}`: {m}", value.name())))?;
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
            if let Some(bad) = g.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
                return Err(format!("scale {bad} is not a positive finite number"));
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
            if !(min.is_finite() && max.is_finite() && min <= max) {
                return Err(format!("range [{min}, {max}] is not a finite interval"));
            }
            let (scale, zero_point) = grid_of(config, *min, *max);
            config.scale = vec![scale];
            config.offset = vec![zero_point];
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
        let report = apply_imported(ctx.graph, &self.values).map_err(|e| invalid(e.to_string()))?;
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
