//! `mppq info`: what a model file holds: IR and opset versions, producer, graph inputs and
//! outputs with types and symbolic shapes, initializer totals and a census of operator types.

use indexmap::IndexMap;
use mppq_ir::{Model, ValueType};
use std::fmt;

/// A summary of a model, printable as a report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelInfo {
    pub ir_version: i64,
    pub opset_imports: Vec<(String, i64)>,
    pub producer: String,
    pub graph_name: String,
    pub inputs: Vec<(String, String)>,
    pub outputs: Vec<(String, String)>,
    pub initializer_count: usize,
    pub initializer_bytes: usize,
    pub operation_count: usize,
    /// Operator type (with domain when not the default one) → count, most frequent first.
    pub op_types: Vec<(String, usize)>,
    /// Operator types the executor cannot run, if known.
    pub unsupported: Vec<String>,
}

fn type_string(ty: Option<&ValueType>) -> String {
    ty.map_or_else(|| "?".to_string(), ValueType::to_string)
}

impl ModelInfo {
    pub fn new(model: &Model) -> Self {
        let g = &model.graph;
        let mut census: IndexMap<String, usize> = IndexMap::new();
        for (_, op) in g.operations() {
            *census.entry(op.qualified_type()).or_default() += 1;
        }
        let mut op_types: Vec<(String, usize)> = census.into_iter().collect();
        op_types.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let describe = |ids: &[mppq_ir::VarId]| {
            ids.iter()
                .filter_map(|id| g.variable(*id).ok())
                .map(|v| {
                    let ty = v.ty.as_ref().or(None);
                    let shown = match (&v.value, ty) {
                        (Some(t), None) => format!("{}{:?} (initializer)", t.dtype(), t.shape()),
                        _ => type_string(ty),
                    };
                    (v.name.clone(), shown)
                })
                .collect()
        };
        ModelInfo {
            ir_version: model.ir_version,
            opset_imports: model
                .opset_imports
                .iter()
                .map(|(d, v)| (if d.is_empty() { "ai.onnx".to_string() } else { d.clone() }, *v))
                .collect(),
            producer: format!("{} {}", model.producer_name, model.producer_version).trim().to_string(),
            graph_name: g.name.clone(),
            inputs: describe(&g.feed_inputs()),
            outputs: describe(g.outputs()),
            initializer_count: g.initializers().count(),
            initializer_bytes: g.initializers().filter_map(|(_, v)| v.value.as_ref()).map(|t| t.byte_len()).sum(),
            operation_count: g.num_operations(),
            op_types,
            unsupported: unsupported_ops(model, &mppq_exec::OpRegistry::builtin()),
        }
    }
}

/// Operator types of `model` (sub-graphs included) that `registry` cannot run, as
/// `Type (domain, opset N)`.
pub fn unsupported_ops(model: &Model, registry: &mppq_exec::OpRegistry) -> Vec<String> {
    fn walk(g: &mppq_ir::Graph, registry: &mppq_exec::OpRegistry, out: &mut Vec<String>) {
        for (_, op) in g.operations() {
            if !registry.supports(&op.domain, &op.op_type, op.opset) {
                let domain = if op.domain.is_empty() { "ai.onnx" } else { &op.domain };
                let entry = format!("{} ({domain}, opset {})", op.op_type, op.opset);
                if !out.contains(&entry) {
                    out.push(entry);
                }
            }
            for attr in op.attributes.values() {
                match attr {
                    mppq_ir::Attribute::Graph(sub) => walk(sub, registry, out),
                    mppq_ir::Attribute::Graphs(subs) => subs.iter().for_each(|s| walk(s, registry, out)),
                    _ => {}
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&model.graph, registry, &mut out);
    out.sort();
    out
}

fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

impl fmt::Display for ModelInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph        {}", if self.graph_name.is_empty() { "(unnamed)" } else { &self.graph_name })?;
        writeln!(f, "ir version   {}", self.ir_version)?;
        let opsets: Vec<String> = self.opset_imports.iter().map(|(d, v)| format!("{d} {v}")).collect();
        writeln!(f, "opsets       {}", opsets.join(", "))?;
        writeln!(f, "producer     {}", if self.producer.is_empty() { "(none)" } else { &self.producer })?;
        writeln!(f, "initializers {} ({})", self.initializer_count, human_bytes(self.initializer_bytes))?;
        writeln!(f, "operations   {}", self.operation_count)?;
        for (title, list) in [("inputs", &self.inputs), ("outputs", &self.outputs)] {
            writeln!(f, "\n{title}:")?;
            let width = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, ty) in list {
                writeln!(f, "  {name:<width$}  {ty}")?;
            }
        }
        writeln!(f, "\noperator types:")?;
        let width = self.op_types.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (op, count) in &self.op_types {
            writeln!(f, "  {op:<width$}  {count:>5}")?;
        }
        if !self.unsupported.is_empty() {
            writeln!(f, "\nnot supported by the executor: {}", self.unsupported.join(", "))?;
        }
        Ok(())
    }
}
