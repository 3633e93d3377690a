//! What a model's inputs accept: names, element types and declared shapes, and the check of a
//! tensor read from a file against them (`.npy`/`.npz` arrays, raw `.bin`, decoded images).

use crate::error::{ApiError, Result};
use mppq_ir::{DataType, Dim, Model, TensorData, TensorType};
use std::path::Path;

/// One graph input fed by the user.
#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    /// The declared type; `None` when the model declares none.
    pub ty: Option<TensorType>,
}

impl Input {
    pub fn dtype(&self) -> Option<DataType> {
        self.ty.as_ref().and_then(|t| t.dtype)
    }

    /// Declared dims: `Some(n)` for a fixed size; `None` for a dynamic one (a name, nothing,
    /// or -1 / 0 as PaddlePaddle and old tf2onnx write it).
    pub fn dims(&self) -> Option<Vec<Option<usize>>> {
        let dims = self.ty.as_ref()?.shape.as_ref()?;
        Some(
            dims.iter()
                .map(|d| if let Dim::Known(k) = d { usize::try_from(*k).ok().filter(|k| *k > 0) } else { None })
                .collect(),
        )
    }

    fn shape_text(&self) -> String {
        match &self.ty {
            Some(t) => mppq_ir::ValueType::Tensor(t.clone()).to_string(),
            None => "(undeclared)".into(),
        }
    }
}

/// The inputs a run must feed, in graph order.
#[derive(Clone, Debug)]
pub struct InputSignature {
    pub inputs: Vec<Input>,
}

impl InputSignature {
    pub fn of(model: &Model) -> Self {
        let g = &model.graph;
        let inputs = g
            .feed_inputs()
            .into_iter()
            .map(|id| Input {
                name: g.var_name(id).to_string(),
                ty: g.variable(id).ok().and_then(|v| v.ty.as_ref()?.as_tensor().cloned()),
            })
            .collect();
        Self { inputs }
    }

    /// The input names in graph order (what a positional batch maps onto).
    pub fn input_names(&self) -> Vec<String> {
        self.inputs.iter().map(|i| i.name.clone()).collect()
    }

    fn names(&self) -> String {
        self.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The one input of a single-input model (images and raw files feed only those).
    pub fn single(&self, path: &Path, what: &str) -> Result<&Input> {
        match self.inputs.as_slice() {
            [one] => Ok(one),
            _ => Err(ApiError::data(
                path,
                format!(
                    "{what} can feed a single-input model; this one has {} inputs ({}): use .npz files (keys = input names)",
                    self.inputs.len(),
                    self.names()
                ),
            )),
        }
    }

    /// Reads an `.npz` (keys = input names) or, for a single-input model, an `.npy`, checking
    /// every array against its input.
    pub fn read_arrays(&self, path: &Path) -> Result<Vec<(String, TensorData)>> {
        let arrays = match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => vec![(self.single(path, "a .npy file")?.name.clone(), crate::data::npy::read_npy(path)?)],
            _ => crate::data::npy::read_npz(path)?,
        };
        self.check_batch(path, &arrays)?;
        Ok(arrays)
    }

    /// Checks one batch (keys = input names) against the inputs: every array feeds an input,
    /// every input is fed, each with its declared dtype and shape. `path` names the batch.
    pub fn check_batch(&self, path: &Path, arrays: &[(String, TensorData)]) -> Result<()> {
        for (name, data) in arrays {
            let Some(input) = self.inputs.iter().find(|i| &i.name == name) else {
                return Err(ApiError::data(
                    path,
                    format!("array `{name}` matches no graph input (inputs: {})", self.names()),
                ));
            };
            check(input, path, data)?;
        }
        if let Some(missing) = self.inputs.iter().find(|i| !arrays.iter().any(|(a, _)| *a == i.name)) {
            return Err(ApiError::data(path, format!("no array for input `{}`", missing.name)));
        }
        Ok(())
    }
}

/// Checks a tensor against the input's declared element type and shape (dynamic dims match any
/// size).
pub fn check(input: &Input, path: &Path, data: &TensorData) -> Result<()> {
    let name = &input.name;
    if let Some(dt) = input.dtype()
        && dt != data.dtype()
    {
        return Err(ApiError::data(path, format!("input `{name}` must be {dt}, the file holds {}", data.dtype())));
    }
    if let Some(dims) = input.dims() {
        let fits = dims.len() == data.rank() && dims.iter().zip(data.shape()).all(|(d, s)| d.is_none_or(|d| d == *s));
        if !fits {
            return Err(ApiError::data(
                path,
                format!("input `{name}` must have shape {}, the file holds {:?}", input.shape_text(), data.shape()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::{Graph, ValueType, Variable};

    fn input(dims: Vec<Dim>) -> Input {
        let mut g = Graph::new("g");
        let mut x = Variable::new("x");
        x.ty = Some(ValueType::Tensor(TensorType::new(DataType::Float, dims)));
        let x = g.add_variable(x).unwrap();
        g.add_graph_input(x).unwrap();
        InputSignature::of(&Model::new(g, 17)).inputs.remove(0)
    }

    #[test]
    fn negative_zero_and_named_dims_take_any_size() {
        let data = TensorData::from_vec(vec![6, 3, 48], &vec![0f32; 6 * 3 * 48]).unwrap();
        let path = Path::new("batch.npy");
        for first in [Dim::Known(-1), Dim::Known(0), Dim::Symbolic("n".into()), Dim::Unknown] {
            let x = input(vec![first.clone(), Dim::Known(3), Dim::Known(-1)]);
            assert!(check(&x, path, &data).is_ok(), "{first:?}");
        }
        let fixed = input(vec![Dim::Known(6), Dim::Known(4), Dim::Known(-1)]);
        let err = check(&fixed, path, &data).unwrap_err().to_string();
        assert!(err.contains("batch.npy") && err.contains("[6, 3, 48]"), "{err}");
    }
}
