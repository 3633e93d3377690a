//! Calibration batches handed over in memory, one at a time (the Python binding's iterables:
//! a `DataLoader`, a generator, a list). Each batch is checked as a file's would be (input
//! names, dtypes, shapes, NaN/Inf) the moment it arrives, naming its position; the first ones
//! stay in memory up to `cache_mib`, the rest go to a private temporary folder as `.npy` files
//! and are read again when a pass asks for them, so memory stays as bounded as for a folder.

use super::{Batch, CalibrationSet, DataSetting, ImageSpec, Source, check_finite, signature::InputSignature};
use crate::error::{ApiError, Result};
use mppq_ir::Model;
use std::path::PathBuf;
use std::sync::Arc;

/// Builds a [`CalibrationSet`] from batches pushed one by one.
pub struct MemoryBatches {
    set: CalibrationSet,
    /// Bytes that may stay in memory.
    budget: usize,
    kept: usize,
    label: String,
}

impl MemoryBatches {
    /// An empty set for `model`; `label` names the batches in errors (`<label>, batch 3`).
    /// Options that describe files (`batch`, `input_shape`, image preprocessing) are refused:
    /// batches given in memory are already tensors.
    pub fn new(model: &Model, label: &str, setting: &DataSetting) -> Result<Self> {
        if setting.batch.is_some() || !setting.input_shape.is_empty() || setting.image != ImageSpec::default() {
            return Err(ApiError::data(
                label,
                "data.batch, data.input_shape and image options describe calibration files; batches given in \
                 memory are already the model's input tensors: leave them out",
            ));
        }
        let set = CalibrationSet::empty(InputSignature::of(model));
        Ok(Self { set, budget: setting.cache_mib.saturating_mul(1 << 20), kept: 0, label: label.into() })
    }

    pub fn len(&self) -> usize {
        self.set.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.sources.is_empty()
    }

    /// Checks `batch` (keys = input names) against the model and adds it.
    pub fn push(&mut self, mut batch: Batch) -> Result<()> {
        let index = self.len();
        let label = PathBuf::from(format!("{}, batch {index}", self.label));
        // As `.npz` archives are read: by input name.
        batch.sort_by(|a, b| a.0.cmp(&b.0));
        self.set.signature.check_batch(&label, &batch)?;
        for (name, data) in &batch {
            check_finite(&label, name, data)?;
        }
        let bytes: usize = batch.iter().map(|(_, t)| t.byte_len()).sum();
        if self.set.spill.is_none() && self.kept + bytes <= self.budget {
            self.kept += bytes;
            self.set.sources.push(Source::Memory(label.display().to_string()));
            self.set.cached.push(Some(batch));
            return Ok(());
        }
        let dir = match &self.set.spill {
            Some(dir) => dir.clone(),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("mppq-calibration-")
                    .tempdir()
                    .map_err(|source| ApiError::Io { path: std::env::temp_dir().display().to_string(), source })?;
                self.set.spill.insert(Arc::new(dir)).clone()
            }
        };
        let mut files = Vec::with_capacity(batch.len());
        for (i, (name, data)) in batch.iter().enumerate() {
            let path = dir.path().join(format!("{index:06}_{i}.npy"));
            crate::data::npy::write_npy(&path, data)?;
            files.push((name.clone(), path));
        }
        self.set.sources.push(Source::Spilled(label.display().to_string(), files));
        self.set.cached.push(None);
        Ok(())
    }

    /// The set; an empty one is an error.
    pub fn finish(mut self) -> Result<CalibrationSet> {
        if self.is_empty() {
            return Err(ApiError::data(&self.label, "no calibration batch was given"));
        }
        let n = self.len();
        let cached = self.set.cached.iter().filter(|c| c.is_some()).count();
        if cached < n {
            self.set.notes.push(format!(
                "{cached} of {n} batches kept in memory ({} MiB); the others were written to a temporary folder and \
                 are read again when used",
                self.kept >> 20
            ));
        }
        Ok(self.set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::TensorData;

    fn model() -> Model {
        mppq_onnx::load_model(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tiny_cnn.onnx")).unwrap()
    }

    fn batch(value: f32) -> Batch {
        vec![("input".into(), TensorData::from_vec(vec![1, 3, 32, 32], &vec![value; 3 * 32 * 32]).unwrap())]
    }

    #[test]
    fn batches_past_the_cache_are_spilled_and_read_back_equal() {
        let setting = DataSetting { cache_mib: 0, ..Default::default() };
        let mut b = MemoryBatches::new(&model(), "<test>", &setting).unwrap();
        b.push(batch(0.5)).unwrap();
        b.push(batch(-1.0)).unwrap();
        let set = b.finish().unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.batch(1).unwrap().into_owned(), batch(-1.0));
        assert!(set.notes()[0].contains("0 of 2 batches kept"), "{:?}", set.notes());
    }

    #[test]
    fn bad_batches_are_refused_naming_their_position() {
        let mut b = MemoryBatches::new(&model(), "<test>", &DataSetting::default()).unwrap();
        b.push(batch(1.0)).unwrap();
        let nan = b.push(batch(f32::NAN)).unwrap_err().to_string();
        assert!(nan.contains("<test>, batch 1") && nan.contains("NaN"), "{nan}");
        let wrong = vec![("x".into(), TensorData::from_vec(vec![1], &[1f32]).unwrap())];
        let named = b.push(wrong).unwrap_err().to_string();
        assert!(named.contains("matches no graph input"), "{named}");
        assert!(MemoryBatches::new(&model(), "<e>", &DataSetting::default()).unwrap().finish().is_err());
    }
}
