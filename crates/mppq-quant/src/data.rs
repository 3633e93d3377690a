//! Calibration data as a stream: a [`CalibrationData`] hands out one batch of feeds at a time on
//! the device asked for, so a pass never needs every batch in memory as device tensors at once
//! (a file-backed set converts each batch when it is asked for). Batches are numbered; a pass may
//! ask for the same batch again (histogram observers run twice).

use mppq_exec::{Device, Value};

/// One batch: (graph input name, value) feeds.
pub type Feeds = Vec<(String, Value)>;

/// Where calibration batches come from.
pub trait CalibrationData {
    /// How many batches there are.
    fn batch_count(&self) -> usize;
    /// Batch `index` (< [`Self::batch_count`]) on `device`. The error says what is wrong with it
    /// (the file and input, for a file-backed set).
    fn batch(&self, index: usize, device: &Device) -> Result<Feeds, String>;
}

/// Batches already in memory as values (tests, and users who build feeds themselves).
impl CalibrationData for [Feeds] {
    fn batch_count(&self) -> usize {
        self.len()
    }
    fn batch(&self, index: usize, _: &Device) -> Result<Feeds, String> {
        self.get(index).cloned().ok_or_else(|| format!("no batch {index} (there are {})", self.len()))
    }
}

impl CalibrationData for Vec<Feeds> {
    fn batch_count(&self) -> usize {
        self.len()
    }
    fn batch(&self, index: usize, device: &Device) -> Result<Feeds, String> {
        self.as_slice().batch(index, device)
    }
}
