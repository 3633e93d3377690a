//! `ncnn-table`: ncnn's int8 calibration table (`ncnn.table`), the text file `ncnn2table` writes
//! and `ncnn2int8` reads to turn an fp32 ncnn model into an int8 one. One line per key,
//! `KEY v1 v2 …`: first `LAYER_param_0` with the weight scales of every quantized Convolution
//! (one per output channel; one per group for ncnn's ConvolutionDepthWise, which every grouped
//! convolution becomes) and InnerProduct (one per output), then `LAYER` with the scale of the
//! layer's input blob. ncnn's scales multiply (`q = round(x · scale)`, clamped to [−127, 127]): each
//! is the reciprocal of our symmetric scale. `ncnn2int8` matches the keys with the layer names of
//! the converted model: `onnx2ncnn` names a layer after its ONNX node (its first output when the
//! node has no name), so convert `model.float.onnx` (BN folded, the names this table uses).
//!
//! The configs must be what ncnn computes: the input symmetric int8 per tensor, the weight
//! symmetric int8 per output channel or per tensor (written once per channel or group); the
//! `ncnn-int8` platform makes them so. Anything else is refused before calibration.

use crate::error::ExportError;
use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState, TensorQuantConfig, config_at, dominator_root};
use mppq_ir::{Graph, Model, OpId, Operation};
use std::fmt::Write as _;
use std::path::Path;

pub struct NcnnTable;

/// The file name the `ncnn-table` exporter writes.
pub const FILE: &str = "ncnn.table";

/// The suffix `ncnn2int8` appends to a layer name for its weight scales.
const WEIGHT_SUFFIX: &str = "_param_0";

impl Exporter for NcnnTable {
    fn name(&self) -> &str {
        "ncnn-table"
    }
    fn description(&self) -> &str {
        "ncnn's int8 calibration table (ncnn.table, as ncnn2table writes it): per-channel weight scales and input scales of Conv/Gemm layers, for ncnn2int8"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn preflight(&self, graph: &Graph, _opset: i64, _options: &ExportOptions) -> Result<()> {
        for id in graph.operations().map(|(id, _)| id).filter(|id| is_quantized_layer(graph, *id)) {
            layer(graph, id, false)?;
        }
        Ok(())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let path = dir.join(FILE);
        write_file(&path, table(&model.graph)?.as_bytes())?;
        Ok(vec![Artifact::new("ncnn int8 calibration table", path)])
    }
}

/// The table's text: every weight line, then every input line, in graph order (as ncnn2table).
pub fn table(graph: &Graph) -> Result<String> {
    let mut layers = Vec::new();
    for id in graph.topological_order()? {
        if is_quantized_layer(graph, id) {
            layers.push(layer(graph, id, true)?);
        }
    }
    let mut text = String::new();
    for l in &layers {
        let _ = write!(text, "{}{WEIGHT_SUFFIX}", l.name);
        for s in &l.weight_scales {
            let _ = write!(text, " {s}");
        }
        text.push('\n');
    }
    for l in &layers {
        let _ = writeln!(text, "{} {}", l.name, l.input_scale);
    }
    Ok(text)
}

/// One quantized ncnn layer: its name and ncnn's (multiplying) scales.
struct Layer {
    name: String,
    weight_scales: Vec<f32>,
    input_scale: f32,
}

/// A Conv or Gemm whose data input is quantized (one ncnn runs in int8).
fn is_quantized_layer(graph: &Graph, id: OpId) -> bool {
    graph.operation(id).is_ok_and(|op| matches!(op.op_type.as_str(), "Conv" | "Gemm"))
        && effective_input(graph, id, 0).is_some()
}

/// The config that decides how input `slot` of `id` is quantized: its own, or the one it shares
/// its parameters with (an input `overlapped` by its producer's output config); `None` when the
/// input is not quantized.
fn effective_input(graph: &Graph, id: OpId, slot: usize) -> Option<&TensorQuantConfig> {
    let loc = ConfigLocation { op: id, side: ConfigSide::Input, index: slot };
    let own = config_at(graph, loc)?;
    if !(own.state.is_active() || own.state.is_baked() || own.state == QuantizationState::Overlapped) {
        return None;
    }
    let root = dominator_root(graph, loc).ok()?;
    config_at(graph, root).filter(|c| c.state.is_active() || c.state.is_baked())
}

/// The layer of operation `id`; `calibrated`: the scales must be there (else only the shape of
/// the configs is checked, before calibration).
fn layer(graph: &Graph, id: OpId, calibrated: bool) -> Result<Layer> {
    let op = graph.operation(id)?;
    let tensor = |slot: usize| {
        op.inputs().get(slot).copied().flatten().map(|v| graph.var_name(v).to_string()).unwrap_or_default()
    };
    let refuse = |slot: usize, message: String| ExportError::Unsupported {
        op: op.name.clone(),
        op_type: op.op_type.clone(),
        tensor: tensor(slot),
        message,
    };
    let symmetric_int8 = |slot: usize| -> Result<&TensorQuantConfig> {
        let Some(c) = effective_input(graph, id, slot) else {
            return Err(refuse(slot, "ncnn quantizes this input; it has no config (use --platform ncnn-int8)".into()));
        };
        if c.num_of_bits != 8 || c.exponent_bits != 0 || !c.policy.is_symmetric() || c.quant_min < -128 {
            return Err(refuse(
                slot,
                format!(
                    "ncnn's int8 is symmetric 8-bit with zero point 0; this config is {} bits, range [{}, {}] (use --platform ncnn-int8)",
                    c.num_of_bits, c.quant_min, c.quant_max
                ),
            ));
        }
        if calibrated && (c.scale.is_empty() || c.offset.iter().any(|z| *z != 0.0)) {
            return Err(refuse(slot, "not calibrated, or a zero point other than 0".into()));
        }
        Ok(c)
    };
    let input = symmetric_int8(0)?;
    if input.scale.len() > 1 {
        return Err(refuse(0, "ncnn has one scale per input blob; this config is per channel".into()));
    }
    let weight = symmetric_int8(1)?;
    let name = if op.name.is_empty() { tensor_name_of_output(graph, op) } else { op.name.clone() };
    let (outputs, per_output) = weight_scale_count(graph, op)?;
    if weight.policy.is_per_channel() && per_output > 1 {
        return Err(refuse(
            1,
            format!(
                "a grouped convolution with {per_output} outputs per group: ncnn keeps one weight scale per group; quantize this weight per tensor (the ncnn-int8 platform does)"
            ),
        ));
    }
    let weight_scales: Vec<f32> = match weight.scale.as_slice() {
        [s] => vec![1.0 / s; outputs],
        many if many.len() == outputs => many.iter().map(|s| 1.0 / s).collect(),
        _ if !calibrated => Vec::new(),
        many => {
            return Err(refuse(
                1,
                format!("{} weight scales; ncnn wants {outputs}, one per output channel", many.len()),
            ));
        }
    };
    let input_scale = input.scale.first().map(|s| 1.0 / s).unwrap_or(0.0);
    Ok(Layer { name, weight_scales, input_scale })
}

/// How many weight scales ncnn keeps for `op`, and how many of our output channels each covers:
/// one per output channel, or for a grouped convolution (ncnn's ConvolutionDepthWise) one per
/// group.
fn weight_scale_count(graph: &Graph, op: &Operation) -> Result<(usize, usize)> {
    let weight =
        op.inputs().get(1).copied().flatten().and_then(|v| graph.variable(v).ok()).and_then(|v| v.value.as_ref());
    let shape: Vec<usize> = weight.map(|t| t.shape().to_vec()).unwrap_or_default();
    let out_channels = match op.op_type.as_str() {
        "Gemm" if op.attr_int("transB", 0)? == 0 => shape.get(1).copied(),
        _ => shape.first().copied(),
    }
    .unwrap_or(1);
    let group = if op.op_type == "Conv" { op.attr_int("group", 1)?.max(1) as usize } else { 1 };
    Ok(if group > 1 { (group, out_channels / group) } else { (out_channels, 1) })
}

fn tensor_name_of_output(graph: &Graph, op: &Operation) -> String {
    op.outputs().first().copied().flatten().map(|v| graph.var_name(v).to_string()).unwrap_or_default()
}

/// An ncnn table read back: ncnn's multiplying scales as written, by layer name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// The weight scales of each layer (`LAYER_param_0` lines).
    pub weights: Vec<(String, Vec<f32>)>,
    /// The input blob scale of each layer.
    pub inputs: Vec<(String, f32)>,
}

/// Reads an ncnn table back (for tests and tools that check a table).
pub fn read(text: &str) -> std::result::Result<Table, String> {
    let (mut weights, mut inputs) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let mut parts = line.split_whitespace();
        let key = parts.next().unwrap_or_default().to_string();
        let values = parts
            .map(|p| p.parse::<f32>().map_err(|e| format!("line {}: `{p}`: {e}", i + 1)))
            .collect::<std::result::Result<Vec<f32>, String>>()?;
        match key.strip_suffix(WEIGHT_SUFFIX) {
            Some(layer) => weights.push((layer.to_string(), values)),
            None => match values.as_slice() {
                [s] => inputs.push((key, *s)),
                _ => {
                    return Err(format!("line {}: layer `{key}` has {} input scales, expected 1", i + 1, values.len()));
                }
            },
        }
    }
    Ok(Table { weights, inputs })
}
