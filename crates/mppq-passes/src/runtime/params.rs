//! Weights and biases by role: an operation's weight and bias (found through the operator-role
//! table, `mppq_ir::roles`) as `f32` views a pass can read and change, then write back into the
//! initializer in its own element type. Equalization, bias correction and AdaRound work on these.
//!
//! A parameter shared by several operations is one initializer: writing it changes every reader.
//! Build a new executor after writing (an executor holds its own copy of the initializers).

use crate::error::{InPass, PassError, Result};
use mppq_ir::{Graph, OpClass, OpId, TensorData, VarId, op_roles};

/// One float parameter as `f32` values.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamView {
    pub var: VarId,
    pub name: String,
    pub shape: Vec<usize>,
    /// Row-major values.
    pub values: Vec<f32>,
    /// The output-channel axis (weights with one; biases: 0).
    pub channel_axis: Option<usize>,
}

impl ParamView {
    /// The number of output channels (1 without a channel axis).
    pub fn channels(&self) -> usize {
        self.channel_axis.map_or(1, |a| self.shape[a])
    }

    /// The channel of flat element `index`.
    pub fn channel_of(&self, index: usize) -> usize {
        match self.channel_axis {
            Some(a) => (index / self.shape[a + 1..].iter().product::<usize>().max(1)) % self.shape[a],
            None => 0,
        }
    }

    /// The largest |value| of each of `channels` channels, element `i` belonging to channel
    /// `channel_of(i)` (an input-channel layout, say).
    pub fn abs_max_by(&self, channels: usize, channel_of: impl Fn(usize) -> usize) -> Vec<f32> {
        let mut r = vec![0f32; channels];
        for (i, v) in self.values.iter().enumerate() {
            let c = channel_of(i);
            r[c] = r[c].max(v.abs());
        }
        r
    }

    /// The largest |value| of each output channel.
    pub fn channel_abs_max(&self) -> Vec<f32> {
        self.abs_max_by(self.channels(), |i| self.channel_of(i))
    }

    /// Multiplies every element of channel `c` by `factors[c]`; one factor per channel.
    pub fn scale_channels(&mut self, factors: &[f32]) -> Result<()> {
        if factors.len() != self.channels() {
            return Err(PassError::Invalid {
                pass: "params",
                message: format!("`{}`: {} factors for {} channels", self.name, factors.len(), self.channels()),
            });
        }
        for i in 0..self.values.len() {
            let c = self.channel_of(i);
            self.values[i] *= factors[c];
        }
        Ok(())
    }
}

/// How outlying the largest of per-channel `ranges` is: largest over median (non-finite values
/// left out; 0 when there is no positive median). SmoothQuant and channel splitting act on it.
pub fn max_over_median(ranges: &[f32]) -> f32 {
    let mut sorted: Vec<f32> = ranges.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f32::total_cmp);
    match (sorted.last(), sorted.get(sorted.len() / 2)) {
        (Some(max), Some(median)) if *median > 0.0 => max / median,
        _ => 0.0,
    }
}

/// The weight and bias of one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct OpParams {
    pub weight: Option<ParamView>,
    pub bias: Option<ParamView>,
}

fn view(graph: &Graph, var: VarId, channel_axis: Option<usize>) -> Result<Option<ParamView>> {
    let v = graph.variable(var).in_pass("params")?;
    let Some(t) = v.value.as_ref().filter(|t| t.dtype().is_float()) else { return Ok(None) };
    let values = t.to_f32_vec().in_pass("params")?;
    Ok(Some(ParamView { var, name: v.name.clone(), shape: t.shape().to_vec(), values, channel_axis }))
}

/// The weight (a float initializer in the op's weight slot, with its channel axis) and bias (a
/// float initializer in its bias slot) of `op`; `None` where the slot is empty or computed at run
/// time.
pub fn op_params(graph: &Graph, op: OpId) -> Result<OpParams> {
    let o = graph.operation(op).in_pass("params")?;
    let roles = op_roles(o);
    let slot_var = |slot: usize| o.inputs().get(slot).copied().flatten();
    let weight = match roles.weight().and_then(|(slot, axis, _)| Some((slot_var(slot)?, axis))) {
        Some((var, axis)) => {
            let rank = graph.variable(var).in_pass("params")?.value.as_ref().map_or(0, TensorData::rank);
            view(graph, var, axis.resolve(rank))?
        }
        None => None,
    };
    let bias = match roles.bias().and_then(slot_var) {
        Some(var) => view(graph, var, Some(0))?,
        None => None,
    };
    Ok(OpParams { weight, bias })
}

/// Writes `view`'s values back into its initializer, in the initializer's element type and shape.
pub fn write_param(graph: &mut Graph, view: &ParamView) -> Result<()> {
    let v = graph.variable_mut(view.var).in_pass("params")?;
    let Some(old) = v.value.as_ref() else {
        return Err(PassError::Invalid { pass: "params", message: format!("`{}` is not an initializer", view.name) });
    };
    if old.shape() != view.shape.as_slice() {
        return Err(PassError::Invalid {
            pass: "params",
            message: format!("`{}`: shape {:?} written over {:?}", view.name, view.shape, old.shape()),
        });
    }
    let data = TensorData::from_f32_as(old.dtype(), view.shape.clone(), &view.values).in_pass("params")?;
    v.value = Some(data);
    Ok(())
}

/// Which input channel of an operation each element of its weight multiplies: the axis the
/// activation's channels meet the weight on (Conv: axis 1 within each group; Gemm: the `K` axis;
/// MatMul: the first axis of a 2-D weight). Equalization and SmoothQuant scale weights by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputChannels {
    /// Channel = index along `axis` of a weight of `shape`.
    Axis { axis: usize, shape: Vec<usize> },
    /// A grouped Conv weight `[out, in/group, k…]`: channel = group · (in/group) + local index.
    Grouped { out_per_group: usize, in_per_group: usize, inner: usize, groups: usize },
}

impl InputChannels {
    /// How many input channels the operation reads.
    pub fn count(&self) -> usize {
        match self {
            Self::Axis { axis, shape } => shape[*axis],
            Self::Grouped { in_per_group, groups, .. } => in_per_group * groups,
        }
    }

    /// The input channel flat weight element `index` multiplies.
    pub fn channel_of(&self, index: usize) -> usize {
        match self {
            Self::Axis { axis, shape } => (index / shape[axis + 1..].iter().product::<usize>().max(1)) % shape[*axis],
            Self::Grouped { out_per_group, in_per_group, inner, .. } => {
                let out = index / (in_per_group * inner);
                (out / out_per_group) * in_per_group + (index / inner) % in_per_group
            }
        }
    }
}

/// The input-channel layout of `op`'s weight `view` (see [`InputChannels`]); `None` for operators
/// and layouts without one (a batched MatMul weight, a grouped ConvTranspose).
pub fn input_channels(graph: &Graph, op: OpId, view: &ParamView) -> Option<InputChannels> {
    let o = graph.operation(op).ok()?;
    let shape = view.shape.clone();
    let roles = op_roles(o);
    if !roles.is(OpClass::WeightedLinear) {
        return None;
    }
    let axis = roles.input_channel_axis(shape.len())?;
    if !roles.is(OpClass::Convolution) {
        // Dense: a [K, N] (or [N, K]) matrix; a batched MatMul weight has no one layout.
        return (shape.len() == 2).then_some(InputChannels::Axis { axis, shape });
    }
    if shape.len() < 3 {
        return None;
    }
    let groups = o.attr_int("group", 1).ok()?.max(1) as usize;
    if groups == 1 {
        return Some(InputChannels::Axis { axis, shape });
    }
    // Grouped: a Conv weight [out, in / groups, k…] maps output channels to their group's
    // inputs; a grouped ConvTranspose ([in, out / groups, k…]) is left alone.
    let (out, in_per_group) = (shape[0], shape[1]);
    (axis == 1 && out % groups == 0).then(|| InputChannels::Grouped {
        out_per_group: out / groups,
        in_per_group,
        inner: shape[2..].iter().product(),
        groups,
    })
}
