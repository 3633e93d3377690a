//! Calibration data: a directory of batches, one file per batch sorted by name — `.npy` for a
//! single-input model, `.npz` (keys = input names) otherwise. Every file is checked against the
//! model's declared inputs (names, dtypes, shapes) and for NaN/Inf before anything runs, so a bad
//! batch is reported with its file and input instead of surfacing halfway through calibration.

use crate::error::{ApiError, Result};
use crate::run::read_feeds;
use mppq_exec::{Device, Tensor, Value};
use mppq_ir::{Model, TensorData};
use std::path::{Path, PathBuf};

/// The batches of a calibration set, in file-name order.
#[derive(Clone, Debug)]
pub struct CalibrationSet {
    pub files: Vec<PathBuf>,
    pub batches: Vec<Vec<(String, TensorData)>>,
}

impl CalibrationSet {
    /// Reads every `.npy`/`.npz` file of `dir` (or the single file `dir` names). At most `limit`
    /// batches are read when given. An empty set is an error.
    pub fn from_path(model: &Model, dir: &Path, limit: Option<usize>) -> Result<Self> {
        let mut files = if dir.is_file() {
            vec![dir.to_path_buf()]
        } else {
            let entries =
                std::fs::read_dir(dir).map_err(|source| ApiError::Io { path: dir.display().to_string(), source })?;
            let mut files = Vec::new();
            for entry in entries {
                let path = entry.map_err(|source| ApiError::Io { path: dir.display().to_string(), source })?.path();
                if matches!(path.extension().and_then(|e| e.to_str()), Some("npy" | "npz")) && path.is_file() {
                    files.push(path);
                }
            }
            files
        };
        files.sort();
        if files.is_empty() {
            return Err(ApiError::data(
                dir,
                "no calibration batches: expected .npy (single-input models) or .npz files (keys = input names)",
            ));
        }
        if let Some(limit) = limit {
            files.truncate(limit.max(1));
        }
        let mut batches = Vec::with_capacity(files.len());
        for file in &files {
            let feeds = read_feeds(model, file)?;
            for (name, data) in &feeds {
                check_finite(file, name, data)?;
            }
            batches.push(feeds);
        }
        Ok(Self { files, batches })
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Batch `index` as executor feeds on `device`.
    pub fn feeds(&self, index: usize, device: &Device) -> Result<Vec<(String, Value)>> {
        let (Some(batch), Some(file)) = (self.batches.get(index), self.files.get(index)) else {
            return Err(ApiError::Setting(format!("no calibration batch {index} (there are {})", self.len())));
        };
        batch
            .iter()
            .map(|(name, data)| {
                Tensor::from_data(data, device)
                    .map(|t| (name.clone(), Value::Tensor(t)))
                    .map_err(|e| ApiError::data(file, format!("input `{name}`: {e}")))
            })
            .collect()
    }

    /// The batches as executor feeds on `device`.
    pub fn to_values(&self, device: &Device) -> Result<Vec<Vec<(String, Value)>>> {
        (0..self.len()).map(|i| self.feeds(i, device)).collect()
    }
}

/// Float inputs must hold finite numbers: observers would otherwise produce NaN scales.
fn check_finite(file: &Path, name: &str, data: &TensorData) -> Result<()> {
    if !data.dtype().is_float() {
        return Ok(());
    }
    let values = data.to_f32_vec().map_err(|e| ApiError::data(file, format!("input `{name}`: {e}")))?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(ApiError::data(
            file,
            format!("input `{name}` holds {} at flat index {i}: calibration data must be finite", values[i]),
        ));
    }
    Ok(())
}

/// The set as a stream for the passes: each batch becomes device tensors only when asked for.
impl mppq_quant::CalibrationData for CalibrationSet {
    fn batch_count(&self) -> usize {
        self.len()
    }
    fn batch(&self, index: usize, device: &Device) -> std::result::Result<mppq_quant::Feeds, String> {
        self.feeds(index, device).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
    }

    #[test]
    fn reads_sorted_batches_and_limits() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let set = CalibrationSet::from_path(&model, &testdata().join("tiny_cnn_calib"), Some(3)).unwrap();
        assert_eq!(set.len(), 3);
        assert!(set.files[0].ends_with("batch_000.npz") && set.files[2].ends_with("batch_002.npz"));
        let all = CalibrationSet::from_path(&model, &testdata().join("tiny_cnn_calib"), None).unwrap();
        assert_eq!(all.len(), 8, "{:?}", all.files);
    }

    #[test]
    fn npy_batches_feed_a_single_input_model() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2 {
            let values: Vec<f32> = (0..2 * 3 * 32 * 32).map(|k| ((k + i) % 7) as f32 * 0.1).collect();
            let data = TensorData::from_vec(vec![2, 3, 32, 32], &values).unwrap();
            crate::npy::write_npy(&dir.path().join(format!("b{i}.npy")), &data).unwrap();
        }
        let set = CalibrationSet::from_path(&model, dir.path(), None).unwrap();
        assert_eq!(set.len(), 2);
        let (name, data) = &set.batches[1][0];
        assert_eq!(name, model.graph.var_name(model.graph.feed_inputs()[0]));
        assert_eq!(data.shape(), &[2, 3, 32, 32]);
        assert_eq!(data.to_f32_vec().unwrap()[0], 0.1);
        // A wrong shape names the file and the input.
        let bad = TensorData::from_vec(vec![1, 3, 16, 16], &vec![0f32; 768]).unwrap();
        crate::npy::write_npy(&dir.path().join("c.npy"), &bad).unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("c.npy") && err.contains("shape"), "{err}");
    }

    #[test]
    fn empty_dir_and_nan_are_errors_naming_the_file() {
        let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("no calibration batches"), "{err}");

        let input = model.graph.var_name(model.graph.feed_inputs()[0]).to_string();
        let mut values = vec![0.5f32; 3 * 32 * 32];
        values[7] = f32::NAN;
        let data = TensorData::from_vec(vec![1, 3, 32, 32], &values).unwrap();
        let path = dir.path().join("b0.npy");
        crate::npy::write_npy(&path, &data).unwrap();
        let err = CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("b0.npy") && err.contains(&input) && err.contains("NaN"), "{err}");
    }
}
