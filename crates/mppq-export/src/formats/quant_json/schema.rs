//! The quantization-parameter JSON (`quant.json`): every operation's precision and every
//! quantized tensor's parameters, written after calibration and applied back to a float graph
//! (`--quant-config`) without recalibrating. The schema is documented in `docs/export.md`.

use crate::error::{ExportError, Result};
use indexmap::IndexMap;
use mppq_ir::quant::{
    ConfigLocation, ConfigSide, ObserverKind, OperationQuantConfig, PairLimit, QuantBlock, QuantizationPolicy,
    QuantizationState, RoundingPolicy, TargetPrecision, TensorQuantConfig,
};
use mppq_ir::{Attribute, Graph, Model, OpId, VarId};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Value of [`QuantJson::format`].
pub const FORMAT: &str = "mppq-quant-json/1";

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantJson {
    /// Always [`FORMAT`]; other values are rejected.
    pub format: String,
    /// The graph's name (informative).
    pub graph: String,
    /// Every operation by name, in graph order.
    pub operations: IndexMap<String, OpEntry>,
    /// Every quantized tensor by variable name: the config that decides its quantized value
    /// (its producer's output config when exported, else the first consumer's input config).
    pub tensors: IndexMap<String, TensorEntry>,
    /// The same for each quantized sub-graph (If branch, loop body), keyed `operation/attribute`
    /// (e.g. `If_0/then_branch`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub subgraphs: IndexMap<String, QuantJson>,
    /// [`mppq_ir::Graph::weights_fingerprint`] of the float model the file was made for (hex;
    /// the top level only): the passes may have changed weights (equalization, training), and
    /// the file describes the model written beside it (`model.float.onnx`), not the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
}

impl QuantJson {
    /// Whether `graph` has the weights the file was made for (always, for a file that does not
    /// say).
    pub fn made_for_weights_of(&self, graph: &Graph) -> bool {
        self.weights.as_ref().is_none_or(|w| *w == weights_id(graph))
    }
}

/// The `weights` value of `graph`: its weights fingerprint in hex.
fn weights_id(graph: &Graph) -> String {
    format!("{:016x}", graph.weights_fingerprint())
}

/// One operation: its precision and, when it carries configs, one entry per input/output slot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpEntry {
    pub op_type: String,
    pub precision: TargetPrecision,
    /// `None`: the operation has no quantization config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Option<TensorEntry>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<Option<TensorEntry>>>,
}

/// Where a config lives, by names (ids are not stable across loads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotRef {
    pub op: String,
    pub side: ConfigSide,
    pub slot: usize,
    /// The tensor at that slot.
    pub tensor: String,
}

/// One tensor config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorEntry {
    /// The variable this config quantizes.
    pub tensor: String,
    pub bits: u32,
    pub quant_min: i64,
    pub quant_max: i64,
    /// Floating formats only (E4M3: 4 and 3), else 0.
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    /// One per tensor, or one per channel along `axis`.
    pub scale: Vec<f32>,
    pub zero_point: Vec<f32>,
    pub axis: Option<usize>,
    pub rounding: RoundingPolicy,
    /// Property list, e.g. `["per_tensor","linear","asymmetric"]`.
    pub policy: QuantizationPolicy,
    pub observer: ObserverKind,
    pub state: QuantizationState,
    /// The config this one shares its parameters with.
    pub dominated_by: Option<SlotRef>,
    /// Weight code pairs kept within a limit (targets whose kernels saturate int16 pair sums).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_limit: Option<PairLimit>,
    /// Block-wise weights: blocks of `size` along `axis`; `scale`/`zero_point` hold one value per
    /// block, channel-major (block `b` of channel `c` at `c · blocks + b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<QuantBlock>,
}

fn location_ref(g: &Graph, loc: &ConfigLocation) -> Result<SlotRef> {
    let op = g.operation(loc.op)?;
    let vars = match loc.side {
        ConfigSide::Input => op.inputs(),
        ConfigSide::Output => op.outputs(),
    };
    let tensor = vars.get(loc.index).copied().flatten().map(|v| g.var_name(v).to_string()).unwrap_or_default();
    Ok(SlotRef { op: op.name.clone(), side: loc.side, slot: loc.index, tensor })
}

fn entry(g: &Graph, var: Option<VarId>, c: &TensorQuantConfig) -> Result<TensorEntry> {
    Ok(TensorEntry {
        tensor: var.map(|v| g.var_name(v).to_string()).unwrap_or_default(),
        bits: c.num_of_bits,
        quant_min: c.quant_min,
        quant_max: c.quant_max,
        exponent_bits: c.exponent_bits,
        mantissa_bits: c.mantissa_bits,
        scale: c.scale.clone(),
        zero_point: c.offset.clone(),
        axis: c.channel_axis,
        rounding: c.rounding,
        policy: c.policy,
        observer: c.observer,
        state: c.state,
        dominated_by: c.dominated_by.as_ref().map(|l| location_ref(g, l)).transpose()?,
        pair_limit: c.pair_limit.clone(),
        block: c.block,
    })
}

fn slots(g: &Graph, vars: &[Option<VarId>], configs: &[Option<TensorQuantConfig>]) -> Result<Vec<Option<TensorEntry>>> {
    configs
        .iter()
        .enumerate()
        .map(|(i, c)| c.as_ref().map(|c| entry(g, vars.get(i).copied().flatten(), c)).transpose())
        .collect()
}

/// The JSON of a model's quantization state.
pub fn to_quant_json(model: &Model) -> Result<QuantJson> {
    let mut json = graph_json(&model.graph)?;
    json.weights = Some(weights_id(&model.graph));
    Ok(json)
}

/// Sub-graphs that carry quantization configs somewhere inside.
fn quantized_subgraphs(g: &Graph) -> impl Iterator<Item = (String, &Graph)> {
    g.operations().flat_map(|(_, op)| {
        op.attributes.iter().filter_map(move |(attr, a)| match a {
            Attribute::Graph(body) if has_configs(body) => Some((format!("{}/{attr}", op.name), &**body)),
            _ => None,
        })
    })
}

fn has_configs(g: &Graph) -> bool {
    g.operations().any(|(_, op)| {
        op.quant_config.is_some()
            || op.attributes.values().any(|a| matches!(a, Attribute::Graph(body) if has_configs(body)))
    })
}

fn graph_json(g: &Graph) -> Result<QuantJson> {
    let mut operations = IndexMap::new();
    let mut tensors: IndexMap<String, TensorEntry> = IndexMap::new();
    let mut from_producer = std::collections::HashSet::new();
    for (_, op) in g.operations() {
        let (inputs, outputs) = match &op.quant_config {
            Some(qc) => {
                (Some(slots(g, op.inputs(), &qc.input_configs)?), Some(slots(g, op.outputs(), &qc.output_configs)?))
            }
            None => (None, None),
        };
        for e in outputs.iter().flatten().flatten() {
            if e.state.is_active() && e.state != QuantizationState::Overlapped {
                from_producer.insert(e.tensor.clone());
                tensors.insert(e.tensor.clone(), e.clone());
            }
        }
        operations
            .insert(op.name.clone(), OpEntry { op_type: op.op_type.clone(), precision: op.precision, inputs, outputs });
    }
    for op in operations.values() {
        for e in op.inputs.iter().flatten().flatten() {
            let counts = (e.state.is_active() || e.state.is_baked()) && e.state != QuantizationState::Overlapped;
            if counts && !from_producer.contains(&e.tensor) && !tensors.contains_key(&e.tensor) {
                tensors.insert(e.tensor.clone(), e.clone());
            }
        }
    }
    let subgraphs = quantized_subgraphs(g).map(|(key, body)| Ok((key, graph_json(body)?))).collect::<Result<_>>()?;
    Ok(QuantJson { format: FORMAT.into(), graph: g.name.clone(), operations, tensors, subgraphs, weights: None })
}

/// Writes [`to_quant_json`] of `model` to `path` atomically (temp file + rename).
pub fn write_quant_json(model: &Model, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let fail = |message: String| ExportError::Json { file: file.clone(), message };
    let json = serde_json::to_vec_pretty(&to_quant_json(model)?).map_err(|e| fail(e.to_string()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .map_err(|e| fail(format!("cannot create a temp file in {}: {e}", dir.display())))?;
    tmp.write_all(&json).map_err(|e| fail(e.to_string()))?;
    tmp.as_file().sync_all().map_err(|e| fail(e.to_string()))?;
    tmp.persist(path).map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// Reads and checks a quantization JSON file.
pub fn read_quant_json(path: impl AsRef<Path>) -> Result<QuantJson> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| ExportError::Json { file: file.clone(), message: e.to_string() })?;
    let json: QuantJson =
        serde_json::from_slice(&bytes).map_err(|e| ExportError::Json { file: file.clone(), message: e.to_string() })?;
    if json.format != FORMAT {
        return Err(ExportError::Json { file, message: format!("format `{}`, expected `{FORMAT}`", json.format) });
    }
    Ok(json)
}

fn bad(message: String) -> ExportError {
    ExportError::Json { file: "<quant json>".into(), message }
}

fn config_of(g: &Graph, e: &TensorEntry) -> Result<TensorQuantConfig> {
    let dominated_by = match &e.dominated_by {
        None => None,
        Some(r) => {
            let op = g.op_id(&r.op).ok_or_else(|| {
                bad(format!(
                    "tensor `{}` is dominated by a config of operation `{}`, which the graph does not have",
                    e.tensor, r.op
                ))
            })?;
            Some(ConfigLocation { op, side: r.side, index: r.slot })
        }
    };
    let c = TensorQuantConfig {
        policy: e.policy,
        rounding: e.rounding,
        num_of_bits: e.bits,
        quant_min: e.quant_min,
        quant_max: e.quant_max,
        exponent_bits: e.exponent_bits,
        mantissa_bits: e.mantissa_bits,
        scale: e.scale.clone(),
        offset: e.zero_point.clone(),
        channel_axis: e.axis,
        observer: e.observer,
        state: e.state,
        dominated_by,
        pair_limit: e.pair_limit.clone(),
        block: e.block,
    };
    c.validate().map_err(|err| bad(format!("tensor `{}`: {err}", e.tensor)))?;
    Ok(c)
}

fn configs_of(
    g: &Graph,
    op: &str,
    side: &str,
    vars: &[Option<VarId>],
    entries: &[Option<TensorEntry>],
) -> Result<Vec<Option<TensorQuantConfig>>> {
    if entries.len() != vars.len() {
        return Err(bad(format!("operation `{op}` has {} {side}s but the JSON gives {}", vars.len(), entries.len())));
    }
    entries
        .iter()
        .zip(vars)
        .map(|(e, v)| {
            let Some(e) = e else { return Ok(None) };
            let name = v.map(|v| g.var_name(v)).unwrap_or_default();
            if name != e.tensor {
                return Err(bad(format!("operation `{op}`: {side} is `{name}` in the graph but `{}` in the JSON (was the JSON written for this model, after the same fusions?)", e.tensor)));
            }
            config_of(g, e).map(Some)
        })
        .collect()
}

/// Quantization gives a body its own copy of each enclosing constant it quantizes (named
/// `NAME_in_OP`, as a sub-graph must not shadow an enclosing name): the JSON names the copy, the
/// user's original model reads the enclosing constant. Makes the same copies here, so the JSON
/// applies to the original model as to `model.float.onnx` (it was refused: "input is `X` in the
/// graph but `X_in_If_0` in the JSON").
fn localise_captured_constants(outer: &Graph, body: &mut Graph, json: &QuantJson) -> Result<()> {
    let captured = body.captured_names();
    for (op_name, entry) in &json.operations {
        let (Some(id), Some(inputs)) = (body.op_id(op_name), &entry.inputs) else { continue };
        for (slot, e) in inputs.iter().enumerate() {
            let Some(e) = e else { continue };
            let Some(var) = body.operation(id)?.inputs().get(slot).copied().flatten() else { continue };
            let name = body.var_name(var).to_string();
            if name == e.tensor || !captured.contains(&name) || body.var_id(&e.tensor).is_some() {
                continue;
            }
            let value = outer.var_id(&name).and_then(|v| outer.variable(v).ok()?.value.clone());
            let Some(value) = value else { continue };
            let copy = body.add_initializer(e.tensor.clone(), value)?;
            body.set_op_input(id, slot, Some(copy))?;
        }
    }
    Ok(())
}

/// Puts the JSON's precisions and configs on `graph` (matched by operation name; types, slot
/// counts and tensor names must agree). A JSON listing no operation, or leaving out one with
/// weights, is refused: it would leave them float without a word. Nothing is changed when an
/// error is returned.
pub fn apply_quant_json(graph: &mut Graph, json: &QuantJson) -> Result<()> {
    let mut updates: Vec<(OpId, TargetPrecision, Option<OperationQuantConfig>)> = Vec::new();
    for (name, e) in &json.operations {
        let id =
            graph.op_id(name).ok_or_else(|| bad(format!("operation `{name}` ({}) is not in the graph", e.op_type)))?;
        let op = graph.operation(id)?;
        if op.op_type != e.op_type {
            return Err(bad(format!(
                "operation `{name}` is a {} in the graph but a {} in the JSON",
                op.op_type, e.op_type
            )));
        }
        let config = match (&e.inputs, &e.outputs) {
            (Some(i), Some(o)) => Some(OperationQuantConfig {
                input_configs: configs_of(graph, name, "input", op.inputs(), i)?,
                output_configs: configs_of(graph, name, "output", op.outputs(), o)?,
            }),
            (None, None) => None,
            _ => return Err(bad(format!("operation `{name}`: give both `inputs` and `outputs`, or neither"))),
        };
        updates.push((id, e.precision, config));
    }
    // The writer lists every operation, but a graph rebuilt from the float model may keep
    // operations the quantization pipeline folded away (constant paths, in sub-graphs too): so
    // an operation left out is an error when it carries weights, or when none is listed.
    let weighted = |op: &mppq_ir::Operation| {
        mppq_ir::op_roles(op).weight_slots().any(|(slot, ..)| {
            op.inputs().get(slot).copied().flatten().is_some_and(|v| graph.variable(v).is_ok_and(|x| x.value.is_some()))
        })
    };
    let listed = graph.operations().filter(|(_, op)| json.operations.contains_key(&op.name)).count();
    let missing: Vec<&str> = graph
        .operations()
        .filter(|(_, op)| !json.operations.contains_key(&op.name) && (listed == 0 || weighted(op)))
        .map(|(_, op)| op.name.as_str())
        .collect();
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(8).map(|n| format!("`{n}`")).collect();
        return Err(bad(format!(
            "lists {listed} of the graph's {} operations; missing {}{} (was it written by `mppq quantize` for this model?)",
            graph.num_operations(),
            shown.join(", "),
            if missing.len() > shown.len() {
                format!(" and {} more", missing.len() - shown.len())
            } else {
                String::new()
            }
        )));
    }
    // Sub-graphs are checked on copies first, so an error still changes nothing.
    let mut bodies: Vec<(OpId, String, Graph)> = Vec::new();
    for (key, sub) in &json.subgraphs {
        let found = key.rsplit_once('/').and_then(|(op, attr)| {
            let id = graph.op_id(op)?;
            match graph.operation(id).ok()?.attr(attr)? {
                Attribute::Graph(body) => Some((id, attr.to_string(), (**body).clone())),
                _ => None,
            }
        });
        let (id, attr, mut body) =
            found.ok_or_else(|| bad(format!("sub-graph `{key}` (operation/attribute) is not in the graph")))?;
        localise_captured_constants(graph, &mut body, sub)?;
        apply_quant_json(&mut body, sub)?;
        bodies.push((id, attr, body));
    }
    for (id, precision, config) in updates {
        let op = graph.operation_mut(id)?;
        op.precision = precision;
        op.quant_config = config;
    }
    for (id, attr, body) in bodies {
        graph.operation_mut(id)?.attributes.insert(attr, Attribute::Graph(Box::new(body)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::{Operation, Variable};

    /// x → Relu (input + output configs) → y → Sigmoid (input config dominated by the Relu
    /// output) → z.
    fn model() -> Model {
        let mut g = Graph::new("g");
        let [x, y, z] = ["x", "y", "z"].map(|n| g.add_variable(Variable::new(n)).unwrap());
        g.add_graph_input(x).unwrap();
        let relu = g.add_operation(Operation::new("Relu", "relu"), &[Some(x)], &[Some(y)]).unwrap();
        let sig = g.add_operation(Operation::new("Sigmoid", "sig"), &[Some(y)], &[Some(z)]).unwrap();
        g.add_graph_output(z).unwrap();
        let mut c = TensorQuantConfig::linear(8, false, None).unwrap();
        (c.scale, c.offset, c.state) = (vec![0.1], vec![3.0], QuantizationState::Activated);
        let mut d = c.clone();
        (d.state, d.dominated_by) =
            (QuantizationState::Overlapped, Some(ConfigLocation { op: relu, side: ConfigSide::Output, index: 0 }));
        let op = g.operation_mut(relu).unwrap();
        op.precision = TargetPrecision::Int8;
        op.quant_config =
            Some(OperationQuantConfig { input_configs: vec![Some(c.clone())], output_configs: vec![Some(c)] });
        let op = g.operation_mut(sig).unwrap();
        op.precision = TargetPrecision::Int8;
        op.quant_config = Some(OperationQuantConfig { input_configs: vec![Some(d)], output_configs: vec![None] });
        Model::new(g, 13)
    }

    #[test]
    fn schema_keys_and_dominance_by_name() {
        let m = model();
        let json = to_quant_json(&m).unwrap();
        let v: serde_json::Value = serde_json::to_value(&json).unwrap();
        let e = &v["operations"]["sig"]["inputs"][0];
        assert_eq!(e["tensor"], "y");
        assert_eq!(e["state"], "overlapped");
        assert_eq!(e["dominated_by"], serde_json::json!({"op": "relu", "side": "output", "slot": 0, "tensor": "y"}));
        assert_eq!(e["policy"], serde_json::json!(["per_tensor", "linear", "asymmetric"]));
        assert_eq!(
            (e["bits"].as_u64(), e["quant_max"].as_i64(), e["zero_point"][0].as_f64()),
            (Some(8), Some(255), Some(3.0))
        );
        assert_eq!(v["operations"]["relu"]["precision"], "int8");
        // y is listed once, with the producer's (active) config; x by its consumer's.
        assert_eq!(json.tensors.keys().collect::<Vec<_>>(), ["y", "x"]);
        assert_eq!(json.tensors["y"].state, QuantizationState::Activated);

        let mut fresh = model();
        let ids: Vec<_> = fresh.graph.operations().map(|(id, _)| id).collect();
        for id in ids {
            fresh.graph.operation_mut(id).unwrap().quant_config = None;
        }
        apply_quant_json(&mut fresh.graph, &json).unwrap();
        assert_eq!(fresh, m);
    }

    #[test]
    fn mismatched_type_or_slots_are_errors_and_change_nothing() {
        let m = model();
        let mut json = to_quant_json(&m).unwrap();
        json.operations["sig"].op_type = "Tanh".into();
        let mut g = m.graph.clone();
        let err = apply_quant_json(&mut g, &json).unwrap_err().to_string();
        assert!(err.contains("`sig` is a Sigmoid in the graph but a Tanh"), "{err}");
        let mut json = to_quant_json(&m).unwrap();
        json.operations["relu"].inputs.as_mut().unwrap().push(None);
        let err = apply_quant_json(&mut g, &json).unwrap_err().to_string();
        assert!(err.contains("`relu` has 1 inputs but the JSON gives 2"), "{err}");
        assert_eq!(g, m.graph);
        // An operation without weights may be left out (the pipeline may have folded it away);
        // a JSON listing none is refused.
        let mut json = to_quant_json(&m).unwrap();
        json.operations.shift_remove("sig");
        apply_quant_json(&mut g.clone(), &json).unwrap();
        json.operations.clear();
        let err = apply_quant_json(&mut g, &json).unwrap_err().to_string();
        assert!(err.contains("lists 0 of the graph's 2 operations"), "{err}");
    }
}
