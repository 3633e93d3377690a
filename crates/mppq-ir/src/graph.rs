//! The model and its graph: operations and variables in insertion order with stable ids, the
//! producer/consumer links between them, and read-only queries. Mutation lives in [`crate::edit`].

use crate::attribute::{Attribute, SparseTensor};
use crate::error::{IrError, Result};
use crate::quant::{OperationQuantConfig, TargetPrecision};
use crate::tensor::TensorData;
use crate::value_type::ValueType;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Stable id of an operation within its graph; never reused after removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId(pub usize);

/// Stable id of a variable within its graph; never reused after removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VarId(pub usize);

/// A named value: an activation, a graph input/output, or an initializer (`value` is set).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    /// The constant value of an initializer.
    pub value: Option<TensorData>,
    /// The declared type (graph input/output or `value_info`), if any.
    pub ty: Option<ValueType>,
    pub doc_string: String,
    pub(crate) producer: Option<OpId>,
    /// One entry per use: an operation reading it twice appears twice.
    pub(crate) consumers: Vec<OpId>,
}

impl Variable {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: None,
            ty: None,
            doc_string: String::new(),
            producer: None,
            consumers: Vec::new(),
        }
    }

    pub fn producer(&self) -> Option<OpId> {
        self.producer
    }

    pub fn consumers(&self) -> &[OpId] {
        &self.consumers
    }

    /// An initializer (a constant parameter such as a weight).
    pub fn is_parameter(&self) -> bool {
        self.value.is_some()
    }
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub name: String,
    pub op_type: String,
    /// Operator domain; `""` is the default `ai.onnx` domain.
    pub domain: String,
    /// The opset version of `domain` this operation is interpreted under.
    pub opset: i64,
    pub attributes: IndexMap<String, Attribute>,
    pub doc_string: String,
    /// Which precision the operation runs in; decided by a dispatcher.
    pub precision: TargetPrecision,
    /// Quantization configs of its inputs and outputs; set by a quantizer.
    pub quant_config: Option<OperationQuantConfig>,
    /// `None` marks an omitted optional input or output (ONNX's empty name).
    pub(crate) inputs: Vec<Option<VarId>>,
    pub(crate) outputs: Vec<Option<VarId>>,
}

impl Operation {
    /// A new operation of the default domain; wire it with [`Graph::add_operation`].
    pub fn new(op_type: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            op_type: op_type.into(),
            domain: String::new(),
            opset: 0,
            attributes: IndexMap::new(),
            doc_string: String::new(),
            precision: TargetPrecision::Unspecified,
            quant_config: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    pub fn with_domain(mut self, domain: impl Into<String>, opset: i64) -> Self {
        self.domain = domain.into();
        self.opset = opset;
        self
    }

    pub fn with_opset(mut self, opset: i64) -> Self {
        self.opset = opset;
        self
    }

    pub fn with_attr(mut self, name: impl Into<String>, value: Attribute) -> Self {
        self.attributes.insert(name.into(), value);
        self
    }

    /// Runs in float from now on: precision `Fp32` and every config `Fp32` (its tensors, weights
    /// and biases stay float; the configs are kept, so a report still sees what was decided).
    pub fn keep_in_float(&mut self) {
        self.precision = TargetPrecision::Fp32;
        if let Some(c) = self.quant_config.as_mut() {
            c.configs_mut().for_each(|t| t.state = crate::quant::QuantizationState::Fp32);
        }
    }

    pub fn inputs(&self) -> &[Option<VarId>] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[Option<VarId>] {
        &self.outputs
    }

    /// Present (non-omitted) inputs.
    pub fn input_ids(&self) -> impl Iterator<Item = VarId> + '_ {
        self.inputs.iter().flatten().copied()
    }

    /// Present (non-omitted) outputs.
    pub fn output_ids(&self) -> impl Iterator<Item = VarId> + '_ {
        self.outputs.iter().flatten().copied()
    }

    pub fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attributes.get(name)
    }

    /// A required attribute; missing is a typed error naming the op.
    pub fn required_attr(&self, name: &str) -> Result<&Attribute> {
        self.attributes.get(name).ok_or_else(|| IrError::MissingAttribute {
            op: self.name.clone(),
            op_type: self.op_type.clone(),
            name: name.to_string(),
        })
    }

    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64> {
        self.attributes.get(name).map_or(Ok(default), |a| a.as_int(name))
    }

    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32> {
        self.attributes.get(name).map_or(Ok(default), |a| a.as_float(name))
    }

    pub fn attr_string(&self, name: &str, default: &str) -> Result<String> {
        self.attributes.get(name).map_or(Ok(default.to_string()), |a| a.as_str(name))
    }

    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        self.attributes.get(name).map(|a| a.as_ints(name).map(<[i64]>::to_vec)).transpose()
    }

    /// Whether the operation is in ONNX's default domain (`""` or `ai.onnx`).
    pub fn in_default_domain(&self) -> bool {
        self.domain.is_empty() || self.domain == "ai.onnx"
    }

    /// `domain::op_type` for messages, or just `op_type` in the default domain.
    pub fn qualified_type(&self) -> String {
        if self.in_default_domain() { self.op_type.clone() } else { format!("{}::{}", self.domain, self.op_type) }
    }
}

/// A computation graph: its operations, variables, inputs and outputs. Sub-graphs of control
/// flow operations are `Graph`s too; they may read variables of enclosing graphs by name, which
/// appear here as variables without producer, value or input status ("captured").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub name: String,
    pub doc_string: String,
    pub(crate) operations: IndexMap<OpId, Operation>,
    pub(crate) variables: IndexMap<VarId, Variable>,
    pub(crate) names: HashMap<String, VarId>,
    pub(crate) inputs: Vec<VarId>,
    pub(crate) outputs: Vec<VarId>,
    pub(crate) next_op: usize,
    pub(crate) next_var: usize,
    /// Sparse initializers, kept as ONNX gives them.
    pub sparse_initializers: Vec<(String, SparseTensor)>,
}

/// A whole model: the top-level graph plus the metadata ONNX keeps around it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub ir_version: i64,
    /// Operator set version per domain (`""` = ai.onnx), in file order.
    pub opset_imports: IndexMap<String, i64>,
    pub producer_name: String,
    pub producer_version: String,
    pub domain: String,
    pub model_version: i64,
    pub doc_string: String,
    pub metadata: Vec<(String, String)>,
    pub graph: Graph,
    /// Model-local functions, kept as their encoded `FunctionProto` bytes.
    pub functions: Vec<Vec<u8>>,
    /// Training info, kept as encoded `TrainingInfoProto` bytes.
    pub training_info: Vec<Vec<u8>>,
}

impl Model {
    pub fn new(graph: Graph, opset: i64) -> Self {
        let mut opset_imports = IndexMap::new();
        opset_imports.insert(String::new(), opset);
        Self { ir_version: 8, opset_imports, graph, ..Default::default() }
    }

    /// The opset version imported for `domain` (`""` and `ai.onnx` are the same domain).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        lookup_opset(&self.opset_imports, domain)
    }
}

/// The version `imports` gives `domain` (`""` and `ai.onnx` are the same domain).
pub fn lookup_opset(imports: &IndexMap<String, i64>, domain: &str) -> Option<i64> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    imports.get(domain).copied().or_else(|| if domain.is_empty() { imports.get("ai.onnx").copied() } else { None })
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), ..Default::default() }
    }

    pub fn variable(&self, id: VarId) -> Result<&Variable> {
        self.variables.get(&id).ok_or(IrError::UnknownVariable(id.0))
    }

    pub fn variable_mut(&mut self, id: VarId) -> Result<&mut Variable> {
        self.variables.get_mut(&id).ok_or(IrError::UnknownVariable(id.0))
    }

    pub fn operation(&self, id: OpId) -> Result<&Operation> {
        self.operations.get(&id).ok_or(IrError::UnknownOperation(id.0))
    }

    /// Mutable access to an operation's metadata and attributes; its wiring is changed through
    /// the editing API so producer/consumer links stay consistent.
    pub fn operation_mut(&mut self, id: OpId) -> Result<&mut Operation> {
        self.operations.get_mut(&id).ok_or(IrError::UnknownOperation(id.0))
    }

    pub fn var_id(&self, name: &str) -> Option<VarId> {
        self.names.get(name).copied()
    }

    /// The variable called `name`, or a typed error.
    pub fn var_named(&self, name: &str) -> Result<VarId> {
        self.var_id(name).ok_or_else(|| IrError::UnknownVariableName(name.to_string()))
    }

    pub fn op_id(&self, name: &str) -> Option<OpId> {
        self.operations.iter().find(|(_, op)| op.name == name).map(|(id, _)| *id)
    }

    /// Operations in insertion order (not necessarily topological).
    pub fn operations(&self) -> impl Iterator<Item = (OpId, &Operation)> {
        self.operations.iter().map(|(id, op)| (*id, op))
    }

    pub fn variables(&self) -> impl Iterator<Item = (VarId, &Variable)> {
        self.variables.iter().map(|(id, v)| (*id, v))
    }

    pub fn num_operations(&self) -> usize {
        self.operations.len()
    }

    pub fn num_variables(&self) -> usize {
        self.variables.len()
    }

    pub fn inputs(&self) -> &[VarId] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[VarId] {
        &self.outputs
    }

    /// Graph inputs that are not initializers: what a caller must feed.
    pub fn feed_inputs(&self) -> Vec<VarId> {
        self.inputs.iter().copied().filter(|id| self.variables.get(id).is_some_and(|v| v.value.is_none())).collect()
    }

    /// Initializers, in insertion order.
    pub fn initializers(&self) -> impl Iterator<Item = (VarId, &Variable)> {
        self.variables().filter(|(_, v)| v.value.is_some())
    }

    pub fn producer(&self, var: VarId) -> Option<OpId> {
        self.variables.get(&var).and_then(|v| v.producer)
    }

    pub fn consumers(&self, var: VarId) -> &[OpId] {
        self.variables.get(&var).map_or(&[], |v| &v.consumers)
    }

    pub fn is_graph_input(&self, var: VarId) -> bool {
        self.inputs.contains(&var)
    }

    pub fn is_graph_output(&self, var: VarId) -> bool {
        self.outputs.contains(&var)
    }

    /// Operations that produce some input of `op` (each once).
    pub fn upstream(&self, op: OpId) -> Vec<OpId> {
        let mut ups = Vec::new();
        if let Some(o) = self.operations.get(&op) {
            for v in o.input_ids() {
                if let Some(p) = self.producer(v)
                    && !ups.contains(&p)
                {
                    ups.push(p);
                }
            }
        }
        ups
    }

    /// Operations that consume some output of `op` (each once).
    pub fn downstream(&self, op: OpId) -> Vec<OpId> {
        let mut downs = Vec::new();
        if let Some(o) = self.operations.get(&op) {
            for v in o.output_ids() {
                for c in self.consumers(v) {
                    if !downs.contains(c) {
                        downs.push(*c);
                    }
                }
            }
        }
        downs
    }

    /// The name of a variable, or `<unknown>` for a stale id (for messages).
    pub fn var_name(&self, id: VarId) -> &str {
        self.variables.get(&id).map_or("<unknown>", |v| v.name.as_str())
    }

    /// Variables read inside this graph that nothing here defines: neither produced, nor
    /// initializers, nor graph inputs. In a sub-graph these come from enclosing scopes.
    pub fn captured_variables(&self) -> Vec<VarId> {
        self.variables
            .iter()
            .filter(|(id, v)| v.producer.is_none() && v.value.is_none() && !self.inputs.contains(id))
            .filter(|(_, v)| !v.consumers.is_empty())
            .map(|(id, _)| *id)
            .collect()
    }
}
