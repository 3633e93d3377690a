//! What the opset upgrade knows of a tensor without running the graph: its rank and element
//! type from declared types (graph inputs/outputs, `value_info`), initializers and Constant
//! nodes, carried forward through the common operators. Unknown stays unknown: a rewrite that
//! needs a rank then takes its rank-free form (Softmax) or reports a blocker.

use crate::attribute::Attribute;
use crate::dtype::DataType;
use crate::graph::{Graph, OpId, Operation, VarId};
use crate::morph::fold_constants::constant_value;
use crate::tensor::TensorData;
use std::collections::HashMap;

/// Known ranks and element types of a graph's variables.
#[derive(Default)]
pub(super) struct Hints {
    rank: HashMap<VarId, usize>,
    dtype: HashMap<VarId, DataType>,
    /// Lengths of 1-D integer tensors (shapes computed in the graph), so that a Reshape to a
    /// computed shape still has a known rank.
    len: HashMap<VarId, usize>,
}

/// Operators whose first output has the rank and type of their first input.
const SAME_AS_FIRST: &str = "Abs Acos Acosh Asin Asinh Atan Atanh AveragePool BatchNormalization Ceil Celu Clip Conv \
     ConvTranspose Cos Cosh CumSum DepthToSpace Dropout Elu Erf Exp Floor Gelu GlobalAveragePool \
     GlobalLpPool GlobalMaxPool GroupNormalization HardSigmoid HardSwish Hardmax Identity ImageScaler \
     InstanceNormalization LRN LayerNormalization LeakyRelu Log LogSoftmax LpNormalization LpPool MaxPool \
     MeanVarianceNormalization Mish Neg PRelu Pad Reciprocal Relu Resize Round Selu Shrink Sigmoid Sign \
     Sin Sinh Slice Softmax Softplus Softsign SpaceToDepth Sqrt Tan Tanh ThresholdedRelu Tile Upsample";

/// Element-wise operators with (multidirectional) broadcasting: the largest input rank.
const BROADCAST: &str = "Add And BitShift Div Equal Greater GreaterOrEqual Less LessOrEqual Max Mean Min Mod Mul Or Pow Sub \
     Sum Where Xor";

/// Their boolean-valued members.
const COMPARISONS: &str = "And Equal Greater GreaterOrEqual Less LessOrEqual Not Or Xor";

fn listed(list: &str, op_type: &str) -> bool {
    list.split_whitespace().any(|t| t == op_type)
}

fn input(op: &Operation, i: usize) -> Option<VarId> {
    op.inputs().get(i).copied().flatten()
}

/// The constant value of `var`: an initializer, or the output of a Constant node.
pub(super) fn const_value(graph: &Graph, var: VarId) -> Option<TensorData> {
    let v = graph.variable(var).ok()?;
    if let Some(t) = &v.value {
        return Some(t.clone());
    }
    let op = graph.operation(v.producer()?).ok()?;
    if op.op_type != "Constant" || !op.in_default_domain() {
        return None;
    }
    constant_value(op).ok().flatten()
}

/// The constant integer values of `var`, if it has some.
pub(super) fn const_ints(graph: &Graph, var: VarId) -> Option<Vec<i64>> {
    const_value(graph, var)?.to_i64_vec().ok()
}

/// Axes an operator takes from its `axes` attribute or, from the opset where it moved, a
/// constant input.
fn axes_of(graph: &Graph, op: &Operation, slot: usize) -> Option<Vec<i64>> {
    match op.attr("axes") {
        Some(Attribute::Ints(a)) => Some(a.clone()),
        _ => const_ints(graph, input(op, slot)?),
    }
}

impl Hints {
    pub(super) fn of(graph: &Graph) -> Self {
        let mut hints = Hints::default();
        for (id, v) in graph.variables() {
            if let Some(t) = &v.value {
                hints.rank.insert(id, t.rank());
                hints.dtype.insert(id, t.dtype());
                if t.rank() == 1 {
                    hints.len.insert(id, t.len());
                }
            } else if let Some(t) = v.ty.as_ref().and_then(|t| t.as_tensor()) {
                if let Some(shape) = &t.shape {
                    hints.rank.insert(id, shape.len());
                }
                if let Some(d) = t.dtype {
                    hints.dtype.insert(id, d);
                }
            }
        }
        let order: Vec<OpId> = graph.topological_order().unwrap_or_default();
        for id in order {
            if let Ok(op) = graph.operation(id)
                && op.in_default_domain()
            {
                hints.infer(graph, op);
            }
        }
        hints
    }

    pub(super) fn rank(&self, var: VarId) -> Option<usize> {
        self.rank.get(&var).copied()
    }

    pub(super) fn dtype(&self, var: VarId) -> Option<DataType> {
        self.dtype.get(&var).copied()
    }

    fn rank_in(&self, op: &Operation, i: usize) -> Option<usize> {
        self.rank(input(op, i)?)
    }

    fn len_in(&self, op: &Operation, i: usize) -> Option<usize> {
        self.len.get(&input(op, i)?).copied()
    }

    /// The length of `op`'s output when it is a 1-D tensor of computed length (a shape).
    fn infer_len(&self, graph: &Graph, op: &Operation) -> Option<usize> {
        match op.op_type.as_str() {
            "Constant" => constant_value(op).ok().flatten().filter(|v| v.rank() == 1).map(|v| v.len()),
            "Shape" if op.attr("start").is_none() && op.attr("end").is_none() => self.rank_in(op, 0),
            "Cast" | "Identity" | "Neg" | "Abs" => self.len_in(op, 0),
            "Concat" if matches!(op.attr_int("axis", 0), Ok(0 | -1)) => {
                op.inputs().iter().map(|v| v.and_then(|v| self.len.get(&v).copied())).sum()
            }
            "Unsqueeze" if self.rank_in(op, 0) == Some(0) => Some(1),
            "Slice" => {
                let len = self.len_in(op, 0)? as i64;
                let bound = |name: &str, slot: usize| -> Option<i64> {
                    match op.attr(name) {
                        Some(Attribute::Ints(v)) => v.first().copied(),
                        _ => const_ints(graph, input(op, slot)?)?.first().copied(),
                    }
                };
                let step = input(op, 4).map_or(Some(1), |s| const_ints(graph, s)?.first().copied())?;
                if step != 1 {
                    return None;
                }
                let clamp = |v: i64| if v < 0 { (v + len).max(0) } else { v.min(len) };
                let (start, end) = (clamp(bound("starts", 1)?), clamp(bound("ends", 2)?));
                Some((end - start).max(0) as usize)
            }
            _ => None,
        }
    }

    /// Records what `op`'s outputs must be, never overriding a declared type.
    fn infer(&mut self, graph: &Graph, op: &Operation) {
        let t = op.op_type.as_str();
        let first_dtype = input(op, 0).and_then(|v| self.dtype(v));
        let (rank, dtype): (Option<usize>, Option<DataType>) = if t == "Constant" {
            match constant_value(op).ok().flatten() {
                Some(v) => (Some(v.rank()), Some(v.dtype())),
                None => (None, None),
            }
        } else if listed(SAME_AS_FIRST, t) || t == "Not" || t == "IsNaN" || t == "IsInf" {
            let dtype = if matches!(t, "Not" | "IsNaN" | "IsInf") { Some(DataType::Bool) } else { first_dtype };
            (self.rank_in(op, 0), dtype)
        } else if listed(BROADCAST, t) {
            let ranks: Option<Vec<usize>> = op.inputs().iter().map(|v| v.and_then(|v| self.rank(v))).collect();
            let dtype = if listed(COMPARISONS, t) {
                Some(DataType::Bool)
            } else if t == "Where" {
                input(op, 1).and_then(|v| self.dtype(v))
            } else {
                first_dtype
            };
            (ranks.and_then(|r| r.into_iter().max()), dtype)
        } else {
            match t {
                "Cast" => {
                    (self.rank_in(op, 0), op.attr_int("to", 0).ok().and_then(|c| DataType::from_onnx_code(c as i32)))
                }
                "MatMul" => {
                    let r = match (self.rank_in(op, 0), self.rank_in(op, 1)) {
                        // A scalar operand is invalid for MatMul (found by fuzzing: 1 - 1 - 1).
                        (Some(0), _) | (_, Some(0)) => None,
                        (Some(1), Some(1)) => Some(0),
                        (Some(1), Some(b)) => Some(b - 1),
                        (Some(a), Some(1)) => Some(a - 1),
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                    (r, first_dtype)
                }
                "Gemm" | "Flatten" => (Some(2), first_dtype),
                "Transpose" => {
                    let r = match op.attr("perm") {
                        Some(Attribute::Ints(p)) => Some(p.len()),
                        _ => self.rank_in(op, 0),
                    };
                    (r, first_dtype)
                }
                "Shape" => (Some(1), Some(DataType::Int64)),
                "Size" => (Some(0), Some(DataType::Int64)),
                "Reshape" => {
                    let r = match op.attr("shape") {
                        Some(Attribute::Ints(s)) => Some(s.len()),
                        _ => self.len_in(op, 1),
                    };
                    (r, first_dtype)
                }
                "Squeeze" => {
                    let r = match (self.rank_in(op, 0), axes_of(graph, op, 1)) {
                        (Some(r), Some(a)) => r.checked_sub(a.len()),
                        _ => None,
                    };
                    (r, first_dtype)
                }
                "Unsqueeze" => {
                    let r = match (self.rank_in(op, 0), axes_of(graph, op, 1)) {
                        (Some(r), Some(a)) => Some(r + a.len()),
                        _ => None,
                    };
                    (r, first_dtype)
                }
                "Concat" => (op.inputs().iter().find_map(|v| v.and_then(|v| self.rank(v))), first_dtype),
                "Gather" => {
                    let r = match (self.rank_in(op, 0), self.rank_in(op, 1)) {
                        (Some(d), Some(i)) => (d + i).checked_sub(1),
                        _ => None,
                    };
                    (r, first_dtype)
                }
                "Expand" => (self.rank_in(op, 0).zip(self.len_in(op, 1)).map(|(a, b)| a.max(b)), first_dtype),
                "ConstantOfShape" => (self.len_in(op, 0), None),
                "ArgMax" | "ArgMin" => {
                    let keep = op.attr_int("keepdims", 1).unwrap_or(1) != 0;
                    let r = self.rank_in(op, 0).and_then(|r| if keep { Some(r) } else { r.checked_sub(1) });
                    (r, Some(DataType::Int64))
                }
                _ if t.starts_with("Reduce") => {
                    // No axes: every axis, or none with `noop_with_empty_axes` (opset 18).
                    let keep = op.attr_int("keepdims", 1).unwrap_or(1) != 0;
                    let noop = op.attr_int("noop_with_empty_axes", 0).unwrap_or(0) != 0;
                    let r = match (self.rank_in(op, 0), axes_of(graph, op, 1)) {
                        (Some(r), _) if keep => Some(r),
                        (Some(r), Some(a)) if !a.is_empty() => r.checked_sub(a.len()),
                        (Some(r), _) if noop && input(op, 1).is_none() => Some(r),
                        (Some(_), None) if input(op, 1).is_none() => Some(0),
                        _ => None,
                    };
                    (r, first_dtype)
                }
                _ => (None, None),
            }
        };
        // Split and TopK: every output like the input (TopK's indices are int64).
        if matches!(t, "Split" | "TopK") {
            for (i, out) in op.outputs().iter().enumerate() {
                let Some(out) = *out else { continue };
                if let Some(r) = self.rank_in(op, 0) {
                    self.rank.entry(out).or_insert(r);
                }
                let d = if t == "TopK" && i == 1 { Some(DataType::Int64) } else { first_dtype };
                if let Some(d) = d {
                    self.dtype.entry(out).or_insert(d);
                }
            }
            return;
        }
        let Some(out) = op.outputs().first().copied().flatten() else { return };
        if let Some(n) = self.infer_len(graph, op) {
            self.len.entry(out).or_insert(n);
        }
        if let Some(r) = rank {
            self.rank.entry(out).or_insert(r);
        }
        if let Some(d) = dtype {
            self.dtype.entry(out).or_insert(d);
        }
    }
}
