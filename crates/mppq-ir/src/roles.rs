//! Operator roles: the one table that says, for each operator type, what each input slot holds
//! (data, a weight and its output-channel axis, a bias, a float parameter, a shape or index) and
//! which classes the operator belongs to (computing, relay, linear activation, averaging, …).
//!
//! Every pass, quantizer, dispatcher and exporter reads operator roles from here, so adding an
//! operator to the table once teaches every algorithm about it (see `docs/adding-an-operator.md`,
//! "making it quantizable: one row"). Rows are static; [`op_roles`] refines them with the
//! attributes that change a role (Gemm's `transB`, ConvTranspose's `group`, Resize's `mode`).
//! An operator without a row reads every input as data and belongs to no class.

use crate::Operation;

/// Which axis of a weight holds its output channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelAxis {
    /// A fixed axis (Conv: 0; ConvTranspose, LSTM W/R: 1).
    At(usize),
    /// The last axis (MatMul's `B`, `[K, N]` or batched `[…, K, N]`).
    Last,
    /// The axis before the last (MatMul's `B` holds its input channels there: `K` of `[…, K, N]`).
    BeforeLast,
}

impl ChannelAxis {
    /// The axis for a weight of `rank` dimensions; `None` when the weight has too few of them
    /// (a rank-1 MatMul operand has no channel axis).
    pub fn resolve(self, rank: usize) -> Option<usize> {
        match self {
            Self::At(axis) => (axis < rank).then_some(axis),
            Self::Last => (rank >= 2).then(|| rank - 1),
            Self::BeforeLast => (rank >= 2).then(|| rank - 2),
        }
    }
}

/// What one input slot of an operation holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputRole {
    /// A value the operation computes on (quantizable when it is float).
    Data,
    /// A weight when the slot reads a parameter (an initializer); read at run time, it is data.
    /// `group` > 1 (ConvTranspose) means the axis holds `out_channels / group` channels, repeated
    /// for every group.
    Weight { axis: ChannelAxis, group: usize },
    /// An additive bias of the weighted product (Conv/Gemm `B`, `C`; LSTM/GRU/RNN `B`).
    Bias,
    /// A float parameter the runtime reads unquantized (Clip's bounds, Pad's constant value).
    Parameter,
    /// A shape, axis list, index, count or size: never quantized, and what it is computed from
    /// belongs to the shape-or-index region.
    ShapeOrIndex,
}

impl InputRole {
    /// Whether a quantizer may quantize this slot at all (data, weights and biases).
    pub fn is_quantizable(self) -> bool {
        matches!(self, Self::Data | Self::Weight { .. } | Self::Bias)
    }
}

/// A class of operators, used by dispatchers and passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// Carries the model's arithmetic on weights or between activations (Conv, Gemm, MatMul,
    /// attention, recurrent cells); the quantized region starts here.
    Computing,
    /// Produces an activation a following [`OpClass::LinearActivation`] can be fused into by an
    /// integer runtime (Conv+Relu, Add+Relu run as one kernel).
    FusionHost,
    /// A piecewise-linear activation that runs fused with its producer (Relu, Clip): it takes
    /// its producer's precision and may share its output config.
    LinearActivation,
    /// Only selects, moves or copies input values (max pooling, reshapes, nearest/linear
    /// resizing): its output range lies inside its input's, so both may share one scale.
    Relay,
    /// Averages its input (average pooling, ReduceMean): the output range is narrower.
    Averaging,
    /// Element-wise arithmetic between tensors (Add, Sub, Mul, Div, …).
    Elementwise,
    /// Numerics suffer most from quantization (Softmax, normalisations, Exp/Log/Div, …).
    PrecisionSensitive,
    /// Outputs shapes or indices whatever its inputs are (Shape, NonZero, ArgMax, TopK's
    /// indices): a source of the shape-or-index region.
    ShapeSource,
    /// Reads only the metadata of its input (Shape, Size): tracing a shape back stops here.
    MetadataReader,
    /// A linear map of its first input by one weight, plus an optional bias: `y = W·x (+ b)`
    /// over the weight's input channels (Conv, ConvTranspose, Gemm, MatMul). What passes that
    /// rescale channels across a weight (equalization, SmoothQuant), correct a bias or train a
    /// weight look for; its axes are [`OpRoles::output_channel_axis`],
    /// [`OpRoles::input_channel_axis`] and [`OpRoles::activation_channel_axis`].
    WeightedLinear,
    /// A [`OpClass::WeightedLinear`] operator over spatial positions (Conv, ConvTranspose): its
    /// weight has kernel dimensions and its activations hold channels on axis 1 with spatial
    /// axes after them.
    Convolution,
}

/// The roles of one operation's slots and its classes (see [`op_roles`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRoles {
    inputs: Vec<InputRole>,
    /// The role of every slot past `inputs` (variadic operators).
    rest: InputRole,
    classes: Vec<OpClass>,
    /// Output slots that hold shapes or indices (only for [`OpClass::ShapeSource`] operators;
    /// empty = all of them).
    index_outputs: Vec<usize>,
    /// For [`OpClass::WeightedLinear`] operators: the weight axis of the input channels, and the
    /// output activation's axis of the output channels.
    linear_axes: Option<LinearAxes>,
}

/// The axes of a [`OpClass::WeightedLinear`] operator besides its weight's output channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LinearAxes {
    /// The weight axis the input channels run along.
    weight_input: ChannelAxis,
    /// The output activation axis that holds the output channels.
    activation: ChannelAxis,
}

impl OpRoles {
    /// The role of input `slot`.
    pub fn input(&self, slot: usize) -> InputRole {
        self.inputs.get(slot).copied().unwrap_or(self.rest)
    }

    /// Whether the operator belongs to `class`.
    pub fn is(&self, class: OpClass) -> bool {
        self.classes.contains(&class)
    }

    pub fn classes(&self) -> &[OpClass] {
        &self.classes
    }

    /// The weight slot, its channel axis rule and group count (the first weight slot; LSTM's
    /// recurrent weight `R` is found with [`Self::weight_slots`]).
    pub fn weight(&self) -> Option<(usize, ChannelAxis, usize)> {
        self.weight_slots().next()
    }

    /// Every weight slot with its channel axis rule and group count.
    pub fn weight_slots(&self) -> impl Iterator<Item = (usize, ChannelAxis, usize)> + '_ {
        self.inputs.iter().enumerate().filter_map(|(slot, role)| match role {
            InputRole::Weight { axis, group } => Some((slot, *axis, *group)),
            _ => None,
        })
    }

    /// The axis of the weight (of `rank` dimensions) that holds the output channels; `None`
    /// without a weight slot or when the weight has too few dimensions.
    pub fn output_channel_axis(&self, rank: usize) -> Option<usize> {
        self.weight().and_then(|(_, axis, _)| axis.resolve(rank))
    }

    /// The axis of a [`OpClass::WeightedLinear`] operator's weight (of `rank` dimensions) that its
    /// input channels run along: Conv 1, ConvTranspose 0, Gemm 0 (1 with `transB`), MatMul the
    /// one before the last.
    pub fn input_channel_axis(&self, rank: usize) -> Option<usize> {
        self.linear_axes?.weight_input.resolve(rank)
    }

    /// The axis of a [`OpClass::WeightedLinear`] operator's output activation that holds its
    /// output channels: 1 for Conv, ConvTranspose and Gemm, the last for MatMul.
    pub fn activation_channel_axis(&self) -> Option<ChannelAxis> {
        Some(self.linear_axes?.activation)
    }

    /// The bias slot.
    pub fn bias(&self) -> Option<usize> {
        self.inputs.iter().position(|r| *r == InputRole::Bias)
    }

    /// The first data slot (the activation a weighted operator reads).
    pub fn first_data(&self) -> Option<usize> {
        self.inputs.iter().position(|r| *r == InputRole::Data).or((self.rest == InputRole::Data).then_some(0))
    }

    /// Whether input `slot` is a shape or index.
    pub fn is_shape_or_index(&self, slot: usize) -> bool {
        self.input(slot) == InputRole::ShapeOrIndex
    }

    /// Whether output `slot` holds shapes or indices.
    pub fn is_index_output(&self, slot: usize) -> bool {
        self.is(OpClass::ShapeSource) && (self.index_outputs.is_empty() || self.index_outputs.contains(&slot))
    }
}

use ChannelAxis::{At, BeforeLast, Last};
use InputRole::{Bias as B, Data as D, Parameter as P, ShapeOrIndex as S};
use OpClass::*;

const fn w(axis: ChannelAxis) -> InputRole {
    InputRole::Weight { axis, group: 1 }
}

/// One row of the table: operator types (domain `""` = ai.onnx), input roles, the role of any
/// further input, classes, and index outputs of shape sources.
struct Row {
    domain: &'static str,
    types: &'static [&'static str],
    inputs: &'static [InputRole],
    rest: InputRole,
    classes: &'static [OpClass],
    index_outputs: &'static [usize],
    linear_axes: Option<LinearAxes>,
}

const fn row(types: &'static [&'static str], inputs: &'static [InputRole], classes: &'static [OpClass]) -> Row {
    Row { domain: "", types, inputs, rest: S, classes, index_outputs: &[], linear_axes: None }
}

/// Every input is data (element-wise and variadic operators).
const fn variadic(types: &'static [&'static str], classes: &'static [OpClass]) -> Row {
    Row { domain: "", types, inputs: &[], rest: D, classes, index_outputs: &[], linear_axes: None }
}

const fn in_domain(domain: &'static str, r: Row) -> Row {
    Row { domain, ..r }
}

const fn index_outputs(outputs: &'static [usize], r: Row) -> Row {
    Row { index_outputs: outputs, ..r }
}

/// A [`OpClass::WeightedLinear`] row: its weight's input-channel axis and its output
/// activation's channel axis.
const fn linear(weight_input: ChannelAxis, activation: ChannelAxis, r: Row) -> Row {
    Row { linear_axes: Some(LinearAxes { weight_input, activation }), ..r }
}

const MS: &str = "com.microsoft";

/// The table. Slots past a row's `inputs` take its `rest` role (shape/index unless variadic).
const TABLE: &[Row] = &[
    // Weighted computing operators.
    linear(At(1), At(1), row(&["Conv"], &[D, w(At(0)), B], &[Computing, FusionHost, WeightedLinear, Convolution])),
    linear(
        At(0),
        At(1),
        row(&["ConvTranspose"], &[D, w(At(1)), B], &[Computing, FusionHost, WeightedLinear, Convolution]),
    ),
    linear(At(0), At(1), row(&["Gemm"], &[D, w(At(1)), B], &[Computing, FusionHost, WeightedLinear])),
    linear(BeforeLast, Last, row(&["MatMul"], &[D, w(Last)], &[Computing, FusionHost, WeightedLinear])),
    // Recurrent cells: W [dirs, gates·hidden, input] and R [dirs, gates·hidden, hidden] have
    // their output channels on axis 1; B is [dirs, 2·gates·hidden]; sequence_lens is an index.
    row(&["LSTM"], &[D, w(At(1)), w(At(1)), B, S, D, D, P], &[Computing]),
    row(&["GRU", "RNN"], &[D, w(At(1)), w(At(1)), B, S, D], &[Computing]),
    // Attention: ONNX's (opset 23: Q, K, V, mask, past K/V, non-pad lengths) and ONNX
    // Runtime's contrib operators (packed QKV weight [hidden, 3·hidden], output channels last).
    row(&["Attention"], &[D, D, D, D, D, D, S], &[Computing]),
    in_domain(MS, row(&["Attention"], &[D, w(Last), B, S, D, D, S], &[Computing])),
    in_domain(MS, row(&["MultiHeadAttention"], &[D, D, D, B, S, D, D, D, S, D], &[Computing])),
    in_domain(MS, row(&["GroupQueryAttention"], &[D, D, D, D, D, S, S, D, D], &[Computing])),
    // Activations.
    row(&["Relu"], &[D], &[LinearActivation]),
    row(&["Clip"], &[D, P, P], &[LinearActivation]),
    // Element-wise arithmetic.
    variadic(&["Add"], &[Elementwise, FusionHost]),
    variadic(&["Sub", "Mul", "Max", "Min", "Sum", "Mean"], &[Elementwise]),
    variadic(&["Div", "Pow"], &[Elementwise, PrecisionSensitive]),
    variadic(&["Concat"], &[]),
    // Precision-sensitive single-input operators.
    row(
        &["Softmax", "LogSoftmax", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Gelu", "ReduceSumSquare", "ReduceL2"],
        &[D],
        &[PrecisionSensitive],
    ),
    row(
        &["LayerNormalization", "GroupNormalization", "InstanceNormalization", "RMSNormalization"],
        &[D, D, D],
        &[PrecisionSensitive],
    ),
    // Pooling and reductions.
    row(&["MaxPool", "GlobalMaxPool", "MaxRoiPool"], &[D, D], &[Relay]),
    row(&["AveragePool", "GlobalAveragePool"], &[D], &[Averaging]),
    row(&["ReduceMean"], &[D], &[Averaging, PrecisionSensitive]),
    row(&["ReduceMax", "ReduceMin"], &[D], &[Relay]),
    row(&["ReduceSum", "ReduceProd", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp"], &[D], &[]),
    // Operators that only move or select values.
    row(&["Identity", "Flatten", "Transpose", "DepthToSpace", "SpaceToDepth"], &[D], &[Relay]),
    row(&["Reshape", "Squeeze", "Unsqueeze", "Expand", "Tile", "Split"], &[D], &[Relay]),
    row(&["Gather", "GatherElements", "GatherND", "Compress"], &[D], &[Relay]),
    row(&["Slice"], &[D], &[Relay]),
    row(&["Pad"], &[D, S, P], &[Relay]),
    row(&["Resize"], &[D], &[Relay]),
    row(&["Upsample"], &[D], &[Relay]),
    // Operators with index inputs.
    row(&["ScatterND", "ScatterElements", "Scatter"], &[D, S, D], &[]),
    row(&["OneHot"], &[S, S, D], &[]),
    row(&["CumSum", "Trilu", "CenterCropPad", "SplitToSequence"], &[D], &[]),
    row(&["Col2Im"], &[D], &[]),
    row(&["RoiAlign"], &[D, D, S], &[]),
    // Sources of shapes and indices.
    row(&["Shape", "Size"], &[D], &[ShapeSource, MetadataReader]),
    row(&["NonZero", "ArgMax", "ArgMin"], &[D], &[ShapeSource]),
    row(&["Range"], &[S, S, S], &[ShapeSource]),
    row(&["ConstantOfShape"], &[S], &[ShapeSource]),
    row(&["NonMaxSuppression"], &[D, D], &[ShapeSource]),
    index_outputs(&[1], row(&["TopK"], &[D], &[ShapeSource])),
];

/// The roles of `op`: its row (by domain and type), refined by the attributes that change a role.
pub fn op_roles(op: &Operation) -> OpRoles {
    let domain = if op.domain == "ai.onnx" { "" } else { op.domain.as_str() };
    let Some(row) = TABLE.iter().find(|r| r.domain == domain && r.types.contains(&op.op_type.as_str())) else {
        return OpRoles {
            inputs: Vec::new(),
            rest: D,
            classes: Vec::new(),
            index_outputs: Vec::new(),
            linear_axes: None,
        };
    };
    let mut roles = OpRoles {
        inputs: row.inputs.to_vec(),
        rest: row.rest,
        classes: row.classes.to_vec(),
        index_outputs: row.index_outputs.to_vec(),
        linear_axes: row.linear_axes,
    };
    match op.op_type.as_str() {
        // Gemm's B is [K, N], or [N, K] with transB.
        "Gemm" if op.attr_int("transB", 0).unwrap_or(0) != 0 => {
            roles.inputs[1] = w(At(0));
            roles.linear_axes = Some(LinearAxes { weight_input: At(1), activation: At(1) });
        }
        "ConvTranspose" => {
            let group = op.attr_int("group", 1).unwrap_or(1).max(1) as usize;
            roles.inputs[1] = InputRole::Weight { axis: At(1), group };
        }
        // Cubic interpolation overshoots the input's range: not a relay.
        "Resize" | "Upsample" if op.attr_string("mode", "nearest").unwrap_or_default() == "cubic" => {
            roles.classes.retain(|c| *c != Relay)
        }
        _ => {}
    }
    roles
}

/// Every operator type (default domain) with a row in the table: the operators whose roles
/// every algorithm reads from here (the repository's tidy check keeps their names out of
/// passes).
pub fn table_op_types() -> Vec<&'static str> {
    TABLE.iter().filter(|r| r.domain.is_empty()).flat_map(|r| r.types.iter().copied()).collect()
}

/// Operator types (default domain) in `class`, for listings and settings defaults.
pub fn types_in_class(class: OpClass) -> Vec<&'static str> {
    TABLE
        .iter()
        .filter(|r| r.domain.is_empty() && r.classes.contains(&class))
        .flat_map(|r| r.types.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attribute;

    #[test]
    fn weights_biases_and_axes() {
        let conv = op_roles(&Operation::new("Conv", "c"));
        assert_eq!(conv.weight(), Some((1, At(0), 1)));
        assert_eq!((conv.bias(), conv.first_data()), (Some(2), Some(0)));
        assert!(conv.is(Computing) && conv.is(FusionHost));
        let gemm = op_roles(&Operation::new("Gemm", "g").with_attr("transB", Attribute::Int(1)));
        assert_eq!(gemm.weight(), Some((1, At(0), 1)));
        assert_eq!(op_roles(&Operation::new("Gemm", "g")).weight(), Some((1, At(1), 1)));
        let deconv = op_roles(&Operation::new("ConvTranspose", "d").with_attr("group", Attribute::Int(4)));
        assert_eq!(deconv.weight(), Some((1, At(1), 4)));
        assert!(conv.is(WeightedLinear) && conv.is(Convolution) && deconv.is(Convolution));
        assert_eq!((conv.output_channel_axis(4), conv.input_channel_axis(4)), (Some(0), Some(1)));
        assert_eq!((deconv.output_channel_axis(4), deconv.input_channel_axis(4)), (Some(1), Some(0)));
        assert_eq!((gemm.output_channel_axis(2), gemm.input_channel_axis(2)), (Some(0), Some(1)));
        let matmul = op_roles(&Operation::new("MatMul", "m"));
        assert_eq!((matmul.output_channel_axis(3), matmul.input_channel_axis(3)), (Some(2), Some(1)));
        assert_eq!((matmul.activation_channel_axis(), conv.activation_channel_axis()), (Some(Last), Some(At(1))));
        assert!(matmul.is(WeightedLinear) && !matmul.is(Convolution) && matmul.bias().is_none());
        let lstm_roles = op_roles(&Operation::new("LSTM", "l"));
        assert!(!lstm_roles.is(WeightedLinear) && lstm_roles.input_channel_axis(3).is_none());
        assert_eq!(Last.resolve(3), Some(2));
        assert_eq!(Last.resolve(1), None);
        let lstm = op_roles(&Operation::new("LSTM", "l"));
        assert_eq!(lstm.weight_slots().map(|(s, ..)| s).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(lstm.bias(), Some(3));
        assert!(lstm.is_shape_or_index(4));
    }

    #[test]
    fn shape_slots_variadic_ops_and_unknown_ops() {
        let slice = op_roles(&Operation::new("Slice", "s"));
        assert!((1..5).all(|s| slice.is_shape_or_index(s)) && !slice.is_shape_or_index(0));
        let clip = op_roles(&Operation::new("Clip", "c"));
        assert_eq!((clip.input(1), clip.input(2)), (InputRole::Parameter, InputRole::Parameter));
        let concat = op_roles(&Operation::new("Concat", "c"));
        assert!((0..9).all(|s| concat.input(s) == InputRole::Data));
        let custom = op_roles(&Operation::new("MyOp", "m").with_domain("my.domain", 1));
        assert!((0..3).all(|s| custom.input(s) == InputRole::Data) && custom.classes().is_empty());
        let topk = op_roles(&Operation::new("TopK", "t"));
        assert!(!topk.is_index_output(0) && topk.is_index_output(1) && topk.is_shape_or_index(1));
        let cubic = Operation::new("Resize", "r").with_attr("mode", Attribute::String(b"cubic".to_vec()));
        assert!(!op_roles(&cubic).is(Relay) && op_roles(&Operation::new("Resize", "r")).is(Relay));
        let ms = Operation::new("Attention", "a").with_domain(MS, 1);
        assert_eq!(op_roles(&ms).weight(), Some((1, Last, 1)));
        assert_eq!(op_roles(&Operation::new("Attention", "a")).weight(), None);
    }

    #[test]
    fn every_type_has_one_row_per_domain() {
        let mut seen = std::collections::HashSet::new();
        for r in TABLE {
            for t in r.types {
                assert!(seen.insert((r.domain, *t)), "{}::{t} has two rows", r.domain);
            }
        }
    }
}
