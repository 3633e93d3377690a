//! Quantization error analysis: how far a quantized graph's tensors drift from the float run
//! (graph-wise, errors accumulated along the graph) and which single layers hurt the outputs most
//! (layer-wise), with terminal, JSON and HTML reports. See `docs/analysis.md`.
//!
//! Typical use (the `mppq analyse` command does this):
//! ```ignore
//! let report = analyse("tiny_cnn", &graph, &exec, &batches, &AnalyseSetting::default(), |_, _, _| {})?;
//! println!("{}", render_table(&report, 100));
//! report.write_json(Path::new("out/analysis.json"))?;
//! write_html(&report, None, Path::new("out/report.html"))?;
//! ```

pub mod graphwise;
pub mod html;
pub mod layerwise;
pub mod stats;
pub mod table;

pub use graphwise::{graphwise_error, watched_tensors};
pub use html::{render_html, write_html};
pub use layerwise::{layers_to_analyse, layerwise_error};
pub use stats::{Moments, PairSample};
pub use table::render_table;

use crate::error::{ApiError, Result};
use mppq_exec::{Executor, Value};
use mppq_ir::{Graph, OpId, Operation};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version of the JSON layout documented in `docs/analysis.md`.
pub const REPORT_SCHEMA: u32 = 1;

/// Knobs of the analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnalyseSetting {
    /// Most (float, quantized) value pairs kept per watched tensor, over all batches, for
    /// histograms. The error metrics themselves use every element.
    pub sample_cap: usize,
    /// Seed of the sampling (reports are deterministic for a seed).
    pub seed: u64,
    /// Graph-wise: watch the outputs of every quantized op, not only computing ops
    /// (Conv, Gemm, MatMul, …). Graph outputs are always watched.
    pub all_quantized_ops: bool,
    /// Also run the layer-wise analysis (one run per quantized op per batch).
    pub layerwise: bool,
    /// Analyse at most this many batches (all given when `None`).
    pub batches: Option<usize>,
}

impl Default for AnalyseSetting {
    fn default() -> Self {
        Self { sample_cap: 4096, seed: 0x5eed, all_quantized_ops: false, layerwise: false, batches: Some(4) }
    }
}

/// Graph-wise error of one watched tensor: float run vs full quantized simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorStat {
    pub tensor: String,
    /// The producing operation (its name, or `#<id> (<type>)` when unnamed).
    pub op: String,
    pub op_type: String,
    pub graph_output: bool,
    /// Signal-to-noise ratio in dB (higher is better); `null` in JSON when the runs agree exactly.
    #[serde(with = "inf_as_null")]
    pub snr_db: f64,
    pub cosine: f64,
    pub mse: f64,
    /// Elements compared (all batches).
    pub elements: u64,
    /// The histogram sample; not part of the JSON.
    #[serde(skip)]
    pub sample: PairSample,
}

/// Layer-wise error: the graph outputs when only this operation is quantized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerStat {
    pub op: String,
    pub op_type: String,
    /// The op's first output tensor (whose graph-wise histogram the HTML report can show).
    pub output: Option<String>,
    /// SNR of all graph outputs together, in dB; `null` in JSON when they are unchanged.
    #[serde(with = "inf_as_null")]
    pub snr_db: f64,
    pub cosine: f64,
    pub mse: f64,
}

/// Everything one analysis found; serialised as the JSON report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalysisReport {
    pub schema: u32,
    pub model: String,
    pub batches: usize,
    pub sample_cap: usize,
    /// Watched tensors in execution order.
    pub graphwise: Vec<TensorStat>,
    /// Sorted by damage (lowest output SNR first); absent when not requested.
    pub layerwise: Option<Vec<LayerStat>>,
    /// Wall time of this analysis, in seconds.
    #[serde(default)]
    pub seconds: f64,
    /// Wall time of each pass of the quantization run analysed (empty when the configs were
    /// read from a file), so a user sees where the time went.
    #[serde(default)]
    pub passes: Vec<PassTime>,
    /// The CPU class whose integer arithmetic was simulated, and how the weights fit it (ONNX
    /// Runtime platforms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer_arithmetic: Option<mppq_quant::quantizer::IntegerArithmetic>,
    /// The padding-mask input whose padded tokens the graph outputs' figures leave out
    /// (`mppq_quant::padding`), if the graph has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding_mask: Option<String>,
}

/// One pass of the quantization run: its name, what it did, and its wall time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassTime {
    pub pass: String,
    pub summary: String,
    pub seconds: f64,
    /// What the guard measured for a guarded pass that changed something: the calibration
    /// outputs' SNR before and after, and whether the change was kept (what it cost or bought).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
}

impl AnalysisReport {
    /// The graph outputs' rows.
    pub fn outputs(&self) -> impl Iterator<Item = &TensorStat> {
        self.graphwise.iter().filter(|t| t.graph_output)
    }

    /// The layer that hurts the outputs most, when layer-wise ran.
    pub fn worst_layer(&self) -> Option<&LayerStat> {
        self.layerwise.as_ref().and_then(|l| l.first())
    }

    /// The tensor whose histogram the HTML shows by default: the worst layer's output when it
    /// was watched, else the watched tensor with the lowest SNR.
    pub fn default_histogram_tensor(&self) -> Option<&TensorStat> {
        let from_layer = self
            .worst_layer()
            .and_then(|l| l.output.as_deref())
            .and_then(|name| self.graphwise.iter().find(|t| t.tensor == name && !t.sample.is_empty()));
        from_layer.or_else(|| {
            self.graphwise.iter().filter(|t| !t.sample.is_empty()).min_by(|a, b| a.snr_db.total_cmp(&b.snr_db))
        })
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| ApiError::Analysis { tensor: self.model.clone(), message: format!("JSON encoding: {e}") })
    }

    /// Writes the JSON report atomically.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.to_json()?.as_bytes())
    }
}

/// Graph-wise analysis, then (if `setting.layerwise`) layer-wise; `progress(stage, done, total)`
/// is called with stage `"graphwise"` or `"layerwise"`.
pub fn analyse(
    model: &str,
    graph: &Graph,
    exec: &Executor,
    reference: Option<&Executor>,
    batches: &[Vec<(String, Value)>],
    setting: &AnalyseSetting,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<AnalysisReport> {
    let started = std::time::Instant::now();
    let graphwise = graphwise_error(graph, exec, reference, batches, setting, |d, t| progress("graphwise", d, t))?;
    let layerwise = if setting.layerwise {
        Some(layerwise_error(graph, exec, reference, batches, |d, t| progress("layerwise", d, t))?)
    } else {
        None
    };
    Ok(AnalysisReport {
        schema: REPORT_SCHEMA,
        model: model.to_string(),
        batches: batches.len(),
        sample_cap: setting.sample_cap,
        graphwise,
        layerwise,
        seconds: started.elapsed().as_secs_f64(),
        passes: Vec::new(),
        integer_arithmetic: None,
        padding_mask: mppq_quant::padding::TokenPadding::find(graph).map(|p| p.input),
    })
}

/// An operation's name for reports: its name, or `#<id> (<type>)` when unnamed.
pub fn op_label(id: OpId, op: &Operation) -> String {
    if op.name.is_empty() { format!("#{} ({})", id.0, op.op_type) } else { op.name.clone() }
}

/// Whether `op` has a config that the simulation applies (Overlapped ones are covered elsewhere).
pub fn is_quantized(op: &Operation) -> bool {
    op.quant_config.as_ref().is_some_and(|c| {
        c.input_configs
            .iter()
            .chain(&c.output_configs)
            .flatten()
            .any(|t| t.state.is_active() && t.state != mppq_ir::quant::QuantizationState::Overlapped)
    })
}

pub(crate) fn no_batches(model_part: &str) -> ApiError {
    ApiError::Analysis {
        tensor: model_part.into(),
        message: "no batches to analyse: give at least one input batch".into(),
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory, then renames it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| ApiError::Io { path: path.display().to_string(), source };
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// JSON has no infinity: an infinite SNR (no error at all) is written as `null`.
mod inf_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() { s.serialize_f64(*v) } else { s.serialize_none() }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}
