//! The walk over a Caffe net that builds the graph: inputs (Input layers and the legacy
//! `input`/`input_shape`/`input_dim` fields), one conversion per layer (`layers.rs`), blobs
//! turned into SSA values, and the net's outputs.
//!
//! Caffe blobs are names that layers may write more than once: an in-place layer (`top` ==
//! `bottom`, as ReLU usually is) overwrites its input. Every write here makes a new variable.
//! The last write of a blob takes the blob's own name, so outputs carry the names Caffe and OpenCV
//! give them; an earlier write is called `<blob>@<layer that wrote it>`. A graph input keeps its
//! blob's name, and later writes of that blob are all suffixed. Dropout and Split write no new
//! value: their tops name the bottom's value.

use super::error::{CaffeError, Result};
use super::layers;
use super::read::Weights;
use super::schema::{BlobProto, BlobShape, LayerParameter, NetParameter};
use super::shape;
use mppq_ir::{Attribute, DataType, Dim, Graph, IrError, Model, Operation, TensorData, ValueType, VarId, edit};
use std::collections::{HashMap, HashSet};

/// Opset of the operations the converter writes.
pub const CAFFE_OPSET: i64 = 13;

/// Blobs larger than this many elements are refused (a hostile shape must not overflow).
const MAX_ELEMENTS: usize = 1 << 40;

/// A blob's current value: its variable and static shape.
#[derive(Clone, Debug)]
pub(crate) struct Value {
    pub var: VarId,
    pub shape: Vec<usize>,
}

/// The layer being converted, with its trained blobs.
pub(crate) struct Layer<'a> {
    pub param: &'a LayerParameter,
    pub blobs: &'a [BlobProto],
}

impl Layer<'_> {
    pub fn name(&self) -> &str {
        self.param.name()
    }

    pub fn ty(&self) -> &str {
        self.param.r#type()
    }
}

/// The graph under construction and the blob bindings.
pub(crate) struct Net<'a> {
    /// The `.prototxt` and `.caffemodel` names, for errors.
    pub file: &'a str,
    pub weights_file: &'a str,
    graph: Graph,
    /// Every blob name of the net: no helper variable may take one.
    reserved: HashSet<String>,
    current: HashMap<String, Value>,
    writes_left: HashMap<String, usize>,
    input_blobs: HashSet<String>,
    op_names: HashSet<String>,
    /// Variables made by the layer being converted (the others a layer returns are aliases).
    made: HashSet<VarId>,
    /// How many of its blobs the layer being converted read: more in the weights is an error.
    blobs_read: std::cell::Cell<usize>,
}

impl<'a> Net<'a> {
    pub fn layer_error(&self, layer: &Layer, message: impl Into<String>) -> CaffeError {
        CaffeError::Layer {
            file: self.file.to_string(),
            layer: layer.name().to_string(),
            layer_type: layer.ty().to_string(),
            message: message.into(),
        }
    }

    pub fn weights_error(&self, layer: &Layer, message: impl Into<String>) -> CaffeError {
        CaffeError::Weights {
            file: self.weights_file.to_string(),
            layer: layer.name().to_string(),
            layer_type: layer.ty().to_string(),
            message: message.into(),
        }
    }

    fn graph_error(&self, source: IrError) -> CaffeError {
        CaffeError::Graph { file: self.file.to_string(), source }
    }

    fn fresh_var_name(&self, base: &str) -> String {
        edit::unused_name(base, |n| self.reserved.contains(n) || self.graph.var_id(n).is_some())
    }

    /// Blob `index` of the layer as a constant of `shape` (the element count must match).
    pub fn blob(&mut self, layer: &Layer, index: usize, what: &str, shape: &[usize]) -> Result<VarId> {
        let values = self.blob_values(layer, index, what, shape)?;
        self.constant(layer, what, shape.to_vec(), &values)
    }

    /// The values of blob `index`, which must hold `shape`'s element count.
    pub fn blob_values(&self, layer: &Layer, index: usize, what: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let blob = layer.blobs.get(index).ok_or_else(|| {
            self.weights_error(
                layer,
                format!("blob {index} ({what}) is missing: the layer has {} blob(s)", layer.blobs.len()),
            )
        })?;
        self.blobs_read.set(self.blobs_read.get().max(index + 1));
        let expected = shape::count(shape).ok_or_else(|| self.layer_error(layer, "the weight shape overflows"))?;
        super::blob::values(blob, shape, expected)
            .map_err(|m| self.weights_error(layer, format!("blob {index} ({what}) {m}")))
    }

    /// A new `f32` initializer called `<layer>/<what>`.
    pub fn constant(&mut self, layer: &Layer, what: &str, shape: Vec<usize>, values: &[f32]) -> Result<VarId> {
        let data = TensorData::from_vec(shape, values).map_err(|e| self.graph_error(e))?;
        self.initializer(layer, what, data)
    }

    /// A new `i64` initializer (a shape or split sizes).
    pub fn constant_i64(&mut self, layer: &Layer, what: &str, values: &[i64]) -> Result<VarId> {
        let data = TensorData::from_vec(vec![values.len()], values).map_err(|e| self.graph_error(e))?;
        self.initializer(layer, what, data)
    }

    fn initializer(&mut self, layer: &Layer, what: &str, data: TensorData) -> Result<VarId> {
        let name = self.fresh_var_name(&format!("{}/{what}", layer.name()));
        self.graph.add_initializer(name, data).map_err(|e| self.graph_error(e))
    }

    /// Adds an operation of the layer with one output of `shape`. `role` "" names it after the
    /// layer; a helper operation is called `<layer>/<role>`.
    pub fn op(
        &mut self,
        layer: &Layer,
        role: &str,
        op_type: &str,
        inputs: &[VarId],
        attrs: Vec<(&str, Attribute)>,
        shape: Vec<usize>,
    ) -> Result<Value> {
        let mut outs = self.op_multi(layer, role, op_type, inputs, attrs, vec![shape])?;
        outs.pop().ok_or_else(|| self.layer_error(layer, "internal: an operation without output"))
    }

    /// [`Net::op`] with one output per shape of `shapes`.
    pub fn op_multi(
        &mut self,
        layer: &Layer,
        role: &str,
        op_type: &str,
        inputs: &[VarId],
        attrs: Vec<(&str, Attribute)>,
        shapes: Vec<Vec<usize>>,
    ) -> Result<Vec<Value>> {
        let base = if role.is_empty() { layer.name().to_string() } else { format!("{}/{role}", layer.name()) };
        let name = edit::unused_name(&base, |n| self.op_names.contains(n));
        self.op_names.insert(name.clone());
        let mut op = Operation::new(op_type, name.clone()).with_opset(CAFFE_OPSET);
        for (key, value) in attrs {
            op = op.with_attr(key, value);
        }
        let mut outs = Vec::with_capacity(shapes.len());
        for (i, shape) in shapes.into_iter().enumerate() {
            let var_name = self.fresh_var_name(&format!("{name}:{i}"));
            let var = self.graph.ensure_variable(&var_name);
            self.made.insert(var);
            outs.push(Value { var, shape });
        }
        let inputs: Vec<Option<VarId>> = inputs.iter().map(|v| Some(*v)).collect();
        let outputs: Vec<Option<VarId>> = outs.iter().map(|v| Some(v.var)).collect();
        self.graph.add_operation(op, &inputs, &outputs).map_err(|e| self.graph_error(e))?;
        Ok(outs)
    }

    /// Makes `value` the new value of blob `top`, written by `layer`.
    fn bind(&mut self, layer: &Layer, top: &str, value: Value) -> Result<()> {
        if self.made.contains(&value.var) {
            let left = self.writes_left.entry(top.to_string()).or_insert(1);
            *left = left.saturating_sub(1);
            let name = if *left == 0 && !self.input_blobs.contains(top) && self.graph.var_id(top).is_none() {
                top.to_string()
            } else {
                self.fresh_var_name(&format!("{top}@{}", layer.name()))
            };
            self.graph.rename_variable(value.var, &name).map_err(|e| self.graph_error(e))?;
            self.made.remove(&value.var);
        }
        self.current.insert(top.to_string(), value);
        Ok(())
    }

    fn set_type(&mut self, var: VarId, shape: &[usize]) -> Result<()> {
        match self.graph.variable_mut(var) {
            Ok(v) => {
                v.ty = Some(tensor_type(shape));
                Ok(())
            }
            Err(e) => Err(CaffeError::Graph { file: self.file.to_string(), source: e }),
        }
    }

    /// A graph input called `name` of `shape` (checked: positive sizes, bounded count).
    fn add_input(&mut self, name: &str, dims: &[i64]) -> Result<()> {
        let net_error = |m: String| CaffeError::Net { file: self.file.to_string(), message: m };
        let shape: Vec<usize> = dims
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| net_error(format!("input `{name}` has shape {dims:?}: every size must be positive")))?;
        if shape::count(&shape).is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(net_error(format!("input `{name}` of shape {dims:?} is too large")));
        }
        if self.graph.var_id(name).is_some() {
            return Err(net_error(format!("input `{name}` is declared twice")));
        }
        let var = self.graph.ensure_variable(name);
        self.set_type(var, &shape)?;
        self.graph.add_graph_input(var).map_err(|e| self.graph_error(e))?;
        self.input_blobs.insert(name.to_string());
        self.current.insert(name.to_string(), Value { var, shape });
        Ok(())
    }
}

fn tensor_type(shape: &[usize]) -> ValueType {
    ValueType::tensor(DataType::Float, shape.iter().map(|&d| Dim::Known(d as i64)).collect())
}

/// Converts a parsed net with its trained weights into a model of ONNX operations.
pub(crate) fn convert_net(file: &str, weights_file: &str, net: &NetParameter, weights: &Weights) -> Result<Model> {
    let layers = super::read::active_layers(net);
    let mut state = Net {
        file,
        weights_file,
        graph: Graph::new(net.name()),
        reserved: HashSet::new(),
        current: HashMap::new(),
        writes_left: HashMap::new(),
        input_blobs: HashSet::new(),
        blobs_read: std::cell::Cell::new(0),
        op_names: HashSet::new(),
        made: HashSet::new(),
    };
    state.reserved.extend(net.input.iter().cloned());
    for l in &layers {
        state.reserved.extend(l.bottom.iter().chain(&l.top).cloned());
        if l.r#type() != "Input" && !layers::aliases_tops(l.r#type()) {
            for top in &l.top {
                *state.writes_left.entry(top.clone()).or_default() += 1;
            }
        }
    }
    legacy_inputs(&mut state, net)?;
    // Blobs no later layer reads, in the order they became so: Caffe's net outputs.
    let mut unread: Vec<String> = net.input.clone();
    for param in &layers {
        let layer = Layer { param, blobs: weights.blobs(param) };
        if param.r#type() == "Input" {
            input_layer(&mut state, &layer)?;
        } else {
            let inputs = param
                .bottom
                .iter()
                .map(|b| {
                    state.current.get(b).cloned().ok_or_else(|| {
                        state.layer_error(&layer, format!("bottom `{b}` is not produced by an earlier layer or input"))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            state.made.clear();
            state.blobs_read.set(0);
            let outs = layers::convert(&mut state, &layer, &inputs)?;
            if layer.blobs.len() > state.blobs_read.get() {
                return Err(state.weights_error(
                    &layer,
                    format!(
                        "has {} blob(s), the prototxt's layer uses {} (e.g. a bias while `bias_term: false`): Caffe \
                         refuses this; the caffemodel was trained from another prototxt",
                        layer.blobs.len(),
                        state.blobs_read.get()
                    ),
                ));
            }
            if outs.len() != param.top.len() {
                return Err(state.layer_error(
                    &layer,
                    format!("has {} top(s); this conversion makes {}", param.top.len(), outs.len()),
                ));
            }
            if let Some(big) = outs.iter().find(|v| shape::count(&v.shape).is_none_or(|n| n > MAX_ELEMENTS)) {
                return Err(state.layer_error(&layer, format!("makes a blob of shape {:?}, too large", big.shape)));
            }
            for (top, value) in param.top.iter().zip(outs) {
                state.bind(&layer, top, value)?;
            }
        }
        unread.retain(|b| !param.bottom.contains(b) && !param.top.contains(b));
        unread.extend(param.top.iter().cloned());
    }
    let mut seen = HashSet::new();
    for blob in unread.into_iter().filter(|b| seen.insert(b.clone())) {
        add_output(&mut state, &blob)?;
    }
    let mut model = Model::new(state.graph, CAFFE_OPSET);
    model.producer_name = "mppq-caffe".into();
    model.graph.validate(&HashSet::new()).map_err(|source| CaffeError::Graph { file: file.to_string(), source })?;
    Ok(model)
}

/// The net's legacy `input` names with `input_shape` or four `input_dim` each.
fn legacy_inputs(state: &mut Net, net: &NetParameter) -> Result<()> {
    for (i, name) in net.input.iter().enumerate() {
        let dims = match (net.input_shape.get(i), net.input_dim.get(4 * i..4 * i + 4)) {
            (Some(shape), _) => shape.dim.clone(),
            (None, Some(dims)) => dims.iter().map(|&d| i64::from(d)).collect(),
            (None, None) => {
                return Err(CaffeError::Net {
                    file: state.file.to_string(),
                    message: format!("input `{name}` has neither an `input_shape` nor four `input_dim`"),
                });
            }
        };
        state.add_input(name, &dims)?;
    }
    Ok(())
}

/// An `Input` layer: one graph input per top, with its own shape or the single shape given.
fn input_layer(state: &mut Net, layer: &Layer) -> Result<()> {
    let shapes: &[BlobShape] = layer.param.input_param.as_ref().map_or(&[], |p| &p.shape);
    for (i, top) in layer.param.top.iter().enumerate() {
        let shape = match shapes {
            [one] => one,
            many => many.get(i).ok_or_else(|| {
                state.layer_error(layer, format!("gives {} shape(s) for {} top(s)", many.len(), layer.param.top.len()))
            })?,
        };
        state.add_input(top, &shape.dim)?;
    }
    Ok(())
}

/// Marks blob `blob` as a graph output, through an Identity when its value is named otherwise
/// (the top of a Dropout or Split).
fn add_output(state: &mut Net, blob: &str) -> Result<()> {
    let Some(value) = state.current.get(blob).cloned() else { return Ok(()) };
    let mut var = value.var;
    if state.graph.var_name(var) != blob {
        let name = if state.graph.var_id(blob).is_some() { state.fresh_var_name(blob) } else { blob.to_string() };
        let out = state.graph.ensure_variable(&name);
        let op_name = edit::unused_name(&format!("{blob}/identity"), |n| state.op_names.contains(n));
        state.op_names.insert(op_name.clone());
        let op = Operation::new("Identity", op_name).with_opset(CAFFE_OPSET);
        state.graph.add_operation(op, &[Some(var)], &[Some(out)]).map_err(|e| state.graph_error(e))?;
        var = out;
    }
    state.set_type(var, &value.shape)?;
    state.graph.add_graph_output(var).map_err(|e| state.graph_error(e))
}
