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
        // Scanned in blocks without an early exit (vectorised); the offending block is then searched.
        const BLOCK: usize = 4096;
        if let Some(block) = values.chunks(BLOCK).position(|b| !b.iter().fold(true, |ok, v| ok & v.is_finite()))
            && let Some((i, value)) = values[block * BLOCK..].iter().enumerate().find(|(_, v)| !v.is_finite())
        {
            return Err(QuantError::NonFinite { variable: variable.into(), index: block * BLOCK + i, value: *value });
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
    /// Adds finite values (checked by [`ChannelLayout::check`]). Eight running minima and maxima
    /// with plain comparisons, so the loop vectorises (`f32::min`'s NaN rule kept it scalar).
    pub fn add(&mut self, chunk: &[f32]) {
        let (mut lo, mut hi) = ([self.min; 8], [self.max; 8]);
        let mut lanes = chunk.chunks_exact(8);
        for lane in &mut lanes {
            for i in 0..8 {
                lo[i] = if lane[i] < lo[i] { lane[i] } else { lo[i] };
                hi[i] = if lane[i] > hi[i] { lane[i] } else { hi[i] };
            }
        }
        for &v in lanes.remainder() {
            lo[0] = if v < lo[0] { v } else { lo[0] };
            hi[0] = if v > hi[0] { v } else { hi[0] };
        }
        self.min = lo.iter().fold(self.min, |a, &b| if b < a { b } else { a });
        self.max = hi.iter().fold(self.max, |a, &b| if b > a { b } else { a });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_non_finite_value_is_named_with_its_index_in_any_block() {
        for at in [0, 4095, 4096, 10_001] {
            let mut values = vec![1.0f32; 12_000];
            values[at] = f32::NAN;
            values[11_999] = f32::INFINITY;
            let err = ChannelLayout::new(None).check("x", &values, &[12_000]).unwrap_err();
            assert!(matches!(err, QuantError::NonFinite { index, .. } if index == at), "{err}");
        }
    }

    #[test]
    fn ranges_match_a_plain_scan_at_every_length() {
        for len in [1usize, 7, 8, 9, 33, 1000] {
            let values: Vec<f32> = (0..len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.3).collect();
            let mut stat = RangeStat::default();
            stat.add(&values);
            let min = values.iter().copied().fold(f32::INFINITY, f32::min);
            let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!((stat.min, stat.max, stat.count), (min, max, len as u64), "len {len}");
        }
    }
}
