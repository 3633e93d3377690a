//! Graph analyses shared by the dispatchers: operator classes (read from `mppq_ir::roles`), constant (static) values, the
//! shape-or-index (SOI) region, and the final step that applies the ignored scope, the
//! quantizer's declared types and "linear activations follow their producer".

use crate::context::DispatchContext;
use crate::dispatch::{Decision, Dispatch};
use crate::error::DispatchError;
use mppq_ir::quant::TargetPrecision;
use mppq_ir::{Graph, OpClass, OpId, Operation, VarId, op_roles};
use std::collections::{HashMap, HashSet};

/// Whether `op` carries the model's arithmetic and starts the quantized region
/// ([`OpClass::Computing`] in the operator-role table).
pub fn is_computing(op: &Operation) -> bool {
    op_roles(op).is(OpClass::Computing)
}

/// Whether `op` is a linear activation fused with its producer: it takes its precision.
pub fn is_linear_activation(op: &Operation) -> bool {
    op_roles(op).is(OpClass::LinearActivation)
}

/// The input slots of `op` that carry data (not shape/index parameters), present ones only.
pub fn data_inputs(op: &Operation) -> impl Iterator<Item = VarId> + '_ {
    let roles = op_roles(op);
    op.inputs().iter().enumerate().filter(move |(i, _)| !roles.is_shape_or_index(*i)).filter_map(|(_, v)| *v)
}

/// Variables known before inference: initializers and outputs of ops computing on them only.
pub fn static_variables(graph: &Graph, order: &[OpId]) -> HashSet<VarId> {
    let mut out: HashSet<VarId> = graph.initializers().map(|(id, _)| id).collect();
    for id in order {
        let Ok(op) = graph.operation(*id) else {
            continue;
        };
        let inputs: Vec<VarId> = op.input_ids().collect();
        let all_static = if inputs.is_empty() {
            op.op_type == "Constant"
        } else {
            inputs.iter().all(|v| out.contains(v)) && !op.op_type.starts_with("Random")
        };
        if all_static {
            out.extend(op.output_ids());
        }
    }
    out
}

/// The shape-or-index region: operations that compute shapes or indices, with the reason.
///
/// Forward: SOI sources, then (in topological order) every op whose data inputs are SOI
/// values or constants, at least one SOI. Backward: the producers of every shape/index input
/// slot (Reshape's shape, Slice's starts/ends, Gather's indices, ...) and, recursively, what
/// they compute from; tracing stops at computing ops, SOI sources and graph inputs.
pub fn soi_region(graph: &Graph, order: &[OpId], statics: &HashSet<VarId>) -> HashMap<OpId, String> {
    let mut soi: HashMap<OpId, String> = HashMap::new();
    let mut soi_vars: HashSet<VarId> = HashSet::new();
    for id in order {
        let Ok(op) = graph.operation(*id) else {
            continue;
        };
        let roles = op_roles(op);
        if roles.is(OpClass::ShapeSource) {
            soi.insert(*id, format!("shape/index source ({})", op.op_type));
            let outputs = op.outputs().iter().enumerate().filter(|(slot, _)| roles.is_index_output(*slot));
            soi_vars.extend(outputs.filter_map(|(_, v)| *v));
            continue;
        }
        if is_computing(op) {
            continue;
        }
        let data: Vec<VarId> = data_inputs(op).collect();
        let from = data.iter().find(|v| soi_vars.contains(v));
        if let Some(from) = from
            && data.iter().all(|v| soi_vars.contains(v) || statics.contains(v))
        {
            soi.insert(*id, format!("computes on the shape/index value `{}`", graph.var_name(*from)));
            soi_vars.extend(op.output_ids());
        }
    }
    // Backward from every shape/index input slot.
    let mut stack: Vec<(VarId, OpId)> = Vec::new();
    for id in order {
        let Ok(op) = graph.operation(*id) else {
            continue;
        };
        let roles = op_roles(op);
        for (slot, v) in op.inputs().iter().enumerate() {
            if let Some(v) = v.filter(|_| roles.is_shape_or_index(slot)) {
                stack.push((v, *id));
            }
        }
    }
    let mut seen: HashSet<VarId> = HashSet::new();
    while let Some((v, consumer)) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(p) = graph.producer(v) else { continue };
        let Ok(pop) = graph.operation(p) else {
            continue;
        };
        if is_computing(pop) {
            continue;
        }
        let consumer_name = graph.operation(consumer).map(|o| o.name.clone()).unwrap_or_default();
        soi.entry(p)
            .or_insert_with(|| format!("computes `{}`, a shape/index input of `{consumer_name}`", graph.var_name(v)));
        let roles = op_roles(pop);
        if roles.is(OpClass::MetadataReader) || roles.is(OpClass::ShapeSource) {
            continue;
        }
        for u in pop.input_ids() {
            stack.push((u, consumer));
        }
    }
    soi
}

/// What a dispatcher proposes for one op before the common rules apply.
#[derive(Clone, Debug)]
pub enum Proposal {
    Quant(String),
    Fp32(String),
    Soi(String),
    /// Take the final precision of the producer of input 0 (linear activations).
    FollowProducer,
}

/// Common state most dispatchers start from.
pub struct Prepared {
    pub order: Vec<OpId>,
    pub statics: HashSet<VarId>,
    pub soi: HashMap<OpId, String>,
    /// Operations of the ignored scope, with the reason.
    pub ignored: HashMap<OpId, String>,
}

/// Checks the context and runs the analyses every dispatcher needs.
pub fn prepare(graph: &Graph, ctx: &DispatchContext) -> Result<Prepared, DispatchError> {
    if !ctx.precision.is_quantized() {
        return Err(DispatchError::NotQuantized(ctx.precision.name().to_string()));
    }
    let order = graph.topological_order()?;
    let statics = static_variables(graph, &order);
    let soi = soi_region(graph, &order, &statics);
    let ignored = ctx.ignored.resolve(graph)?;
    Ok(Prepared { order, statics, soi, ignored })
}

/// Turns proposals into a [`Dispatch`], in topological order: the ignored scope forces FP32
/// (SOI stays SOI), a quantized proposal for a type the quantizer does not declare becomes
/// FP32, and followers take their producer's final precision.
pub fn finalize(
    name: &str,
    graph: &Graph,
    ctx: &DispatchContext,
    prepared: &Prepared,
    proposals: &HashMap<OpId, Proposal>,
) -> Result<Dispatch, DispatchError> {
    let ignored = &prepared.ignored;
    let mut out = Dispatch::new(name);
    for id in &prepared.order {
        let op = graph.operation(*id)?;
        let proposal = proposals.get(id).cloned().unwrap_or_else(|| Proposal::Fp32("no rule applied".into()));
        let (precision, reason) = match proposal {
            Proposal::Soi(r) => (TargetPrecision::Soi, r),
            _ if ignored.contains_key(id) => (TargetPrecision::Fp32, ignored.get(id).cloned().unwrap_or_default()),
            Proposal::Fp32(r) => (TargetPrecision::Fp32, r),
            Proposal::Quant(r) => (ctx.precision, r),
            Proposal::FollowProducer => {
                let producer = op.inputs().first().copied().flatten().and_then(|v| graph.producer(v));
                match producer.and_then(|p| out.get(p).map(|d| (d.precision, d.op_name.clone()))) {
                    Some((p, pname)) => (p, format!("linear activation follows `{pname}`")),
                    None => (TargetPrecision::Fp32, "linear activation with no producer".to_string()),
                }
            }
        };
        let (precision, reason) = if precision.is_quantized() && !ctx.declares(&op.op_type) {
            (TargetPrecision::Fp32, format!("quantizer does not declare {}", op.op_type))
        } else {
            (precision, reason)
        };
        out.insert(*id, Decision { op_name: op.name.clone(), op_type: op.op_type.clone(), precision, reason });
    }
    Ok(out)
}

/// The activation inputs of `op`: data slots that are not constants.
pub fn activation_inputs<'a>(op: &'a Operation, statics: &'a HashSet<VarId>) -> impl Iterator<Item = VarId> + 'a {
    data_inputs(op).filter(move |v| !statics.contains(v))
}
