//! Channel layout: how observed elements split into channels (one channel per tensor, or one
//! per index along `channel_axis`), with the shape and finiteness checks every observer needs.

use crate::error::{QuantError, Result};

/// Per-tensor (`axis == None`) or per-channel layout; the channel count is fixed by the first
/// observation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelLayout {
    pub axis: Option<usize>,
    pub channels: Option<usize>,
}

impl ChannelLayout {
    pub fn new(axis: Option<usize>) -> Self {
        Self { axis, channels: None }
    }

    /// Checks `values` against `shape` and the layout, rejects NaN/Inf, and returns
    /// `(channels, inner)`: element `i` belongs to channel `(i / inner) % channels`.
    pub fn check(&mut self, variable: &str, values: &[f32], shape: &[usize]) -> Result<(usize, usize)> {
        let shape_err = |message: String| QuantError::Shape { variable: variable.into(), message };
        let count = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d));
        if count != Some(values.len()) {
            return Err(shape_err(format!("shape {shape:?} does not hold {} values", values.len())));
        }
        if let Some((index, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(QuantError::NonFinite { variable: variable.into(), index, value: *value });
        }
        let (channels, inner) = match self.axis {
            None => (1, values.len().max(1)),
            Some(axis) => {
                let Some(&c) = shape.get(axis) else {
                    return Err(shape_err(format!("channel axis {axis} out of range for shape {shape:?}")));
                };
                (c, shape[axis + 1..].iter().product::<usize>().max(1))
            }
        };
        match (self.axis, self.channels) {
            (Some(axis), Some(expected)) if expected != channels => {
                return Err(QuantError::ChannelCountChanged {
                    variable: variable.into(),
                    axis,
                    expected,
                    got: channels,
                });
            }
            _ => self.channels = Some(channels),
        }
        Ok((channels, inner))
    }
}

/// Calls `f(channel, chunk)` for every contiguous run of elements of one channel.
pub fn for_each_chunk(values: &[f32], channels: usize, inner: usize, mut f: impl FnMut(usize, &[f32])) {
    if channels == 1 {
        f(0, values);
        return;
    }
    for (i, chunk) in values.chunks(inner).enumerate() {
        f(i % channels, chunk);
    }
}

/// Running min/max/count of one channel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeStat {
    pub min: f32,
    pub max: f32,
    pub count: u64,
}

impl Default for RangeStat {
    fn default() -> Self {
        Self { min: f32::INFINITY, max: f32::NEG_INFINITY, count: 0 }
    }
}

impl RangeStat {
    pub fn add(&mut self, chunk: &[f32]) {
        for &v in chunk {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += chunk.len() as u64;
    }
}

/// Updates per-channel ranges with one observation (already checked).
pub fn update_ranges(ranges: &mut Vec<RangeStat>, values: &[f32], channels: usize, inner: usize) {
    if ranges.len() != channels {
        ranges.resize(channels, RangeStat::default());
    }
    for_each_chunk(values, channels, inner, |c, chunk| ranges[c].add(chunk));
}
