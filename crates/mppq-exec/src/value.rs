//! [`Value`]: what flows along a graph edge at run time: a tensor, a sequence of tensors, or an
//! optional value.

use crate::error::{ExecError, Result};
use crate::tensor::Tensor;

#[derive(Clone, Debug)]
pub enum Value {
    Tensor(Tensor),
    Sequence(Vec<Tensor>),
    Optional(Option<Box<Value>>),
}

impl Value {
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn into_tensor(self) -> Option<Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

/// Helpers for kernels: take inputs by position with errors that name the node.
pub struct Inputs<'a> {
    values: Vec<Option<Value>>,
    node: &'a str,
    op_type: &'a str,
}

impl<'a> Inputs<'a> {
    pub fn new(values: Vec<Option<Value>>, node: &'a str, op_type: &'a str) -> Self {
        Self { values, node, op_type }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn err(&self, message: String) -> ExecError {
        ExecError::Op { node: self.node.to_string(), op_type: self.op_type.to_string(), message }
    }

    /// Whether input `i` is present (not omitted).
    pub fn has(&self, i: usize) -> bool {
        self.values.get(i).is_some_and(Option::is_some)
    }

    /// The tensor at input `i`, which must be present.
    pub fn tensor(&mut self, i: usize) -> Result<Tensor> {
        match self.values.get_mut(i).and_then(Option::take) {
            Some(Value::Tensor(t)) => Ok(t),
            Some(_) => Err(self.err(format!("input {i} must be a tensor"))),
            None => Err(self.err(format!("input {i} is required"))),
        }
    }

    /// The tensor at input `i` if present.
    pub fn opt_tensor(&mut self, i: usize) -> Result<Option<Tensor>> {
        if self.has(i) { self.tensor(i).map(Some) } else { Ok(None) }
    }

    /// The value at input `i` if present.
    pub fn value(&mut self, i: usize) -> Option<Value> {
        self.values.get_mut(i).and_then(Option::take)
    }

    /// All present tensors from input `start` on (variadic inputs).
    pub fn rest(&mut self, start: usize) -> Result<Vec<Tensor>> {
        let present: Vec<usize> = (start..self.values.len()).filter(|i| self.has(*i)).collect();
        present.into_iter().map(|i| self.tensor(i)).collect()
    }

    /// Input `i` read as a list of i64 (shape and index arguments).
    pub fn ints(&mut self, i: usize) -> Result<Option<Vec<i64>>> {
        Ok(self.opt_tensor(i)?.map(|t| t.to_i64_vec()))
    }
}

/// A run's float outputs by name, as `f32` ([`float_outputs`]).
pub type NamedOutputs = Vec<(String, Vec<f32>)>;

/// The float tensors (f32, f64, f16, bf16; not low-precision stand-ins) among a run's outputs,
/// by name, as `f32`.
pub fn float_outputs(outputs: Vec<(String, Value)>) -> NamedOutputs {
    outputs
        .into_iter()
        .filter_map(|(name, v)| {
            let t = v.into_tensor()?;
            let float = matches!(
                t.dtype(),
                mppq_ir::DataType::Float
                    | mppq_ir::DataType::Double
                    | mppq_ir::DataType::Float16
                    | mppq_ir::DataType::BFloat16
            );
            float.then(|| (name, t.to_f32_vec()))
        })
        .collect()
}
