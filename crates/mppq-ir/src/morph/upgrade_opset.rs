//! `upgrade_opset`: converts the default-domain (`ai.onnx`) operations of a graph and of its
//! sub-graphs from an older opset to a newer one, as ONNX's version converter does, so that a
//! model exported at opset 9–12 can be written at 13 (per-channel Q/DQ), 19 (FP8) or 21 (INT4).
//! Every default-domain operation ends at opset `to`; each one whose signature or meaning
//! changed on the way is rewritten to mean what it meant before. What cannot be converted is a
//! blocker ([`blockers`]) that names the operation, its type and opset, and what would fix it;
//! [`upgrade_opset`] refuses before touching the graph when there is one.
//!
//! The one table of what changed where is [`CHANGES`] (ONNX's changelog and its version
//! converter's adapters are the reference). Rewrites, by the opset where the change happened:
//!
//! | opset | operators | rewrite |
//! | --- | --- | --- |
//! | 2 | Pad | `paddings` → `pads` |
//! | 2 | LpPool, GlobalLpPool | float `p` → int (blocker: not integral) |
//! | 2 | Split | constant `split` input → attribute (blocker: not constant) |
//! | 4 | Concat | `axis` written (its old default 1) |
//! | 5 | Reshape | `shape` attribute → input |
//! | 6 | every operator | `consumed_inputs` dropped |
//! | 6 | Cast | `to` type name → type code |
//! | 6 | Tile | blocker (`tiles`/`axis` inputs) |
//! | 7 | Add Sub Mul Div Pow And Or Xor Equal Greater Less | `broadcast`/`axis` dropped; B aligned at `axis` gets trailing unit dimensions (reshaped constant or Unsqueeze; blocker: ranks unknown) |
//! | 7 | Gemm | `broadcast` dropped |
//! | 7 | PRelu | a 1-D slope of C > 1 values (per channel before 7) gets trailing unit dimensions (blocker: input rank unknown) |
//! | 7 | BatchNormalization, Dropout | `is_test` dropped |
//! | 7 | RNN, GRU, LSTM | `output_sequence` dropped |
//! | 7 | Upsample | `height_scale`/`width_scale` → `scales` = [1, 1, h, w]; mode bilinear → linear |
//! | 9 | BatchNormalization | `spatial` dropped (blocker: `spatial` = 0) |
//! | 9 | MeanVarianceNormalization | `across_channels` → `axes` (blocker: `normalize_variance` = 0) |
//! | 9 | Upsample | `scales` attribute → input |
//! | 9 | Scan | blocker (Scan-8's batch axis and `sequence_lens`) |
//! | 10 | Upsample (deprecated) | → Resize-10 (same inputs and mode) |
//! | 10 | Dropout | mask output becomes boolean: declared type dropped (blocker: the mask is read) |
//! | 10 | Slice | `starts`/`ends`/`axes` → int64 inputs |
//! | 10 | TopK | `k` → int64 [1] input |
//! | 10 | ImageScaler, Scale, Affine, ScaledTanh, ParametricSoftplus, DynamicSlice (experimental, removed) | → Mul/Add/Tanh/Softplus chains, Slice |
//! | 10 | Crop, ATen, GRUUnit, GivenTensorFill (experimental, removed) | blocker |
//! | 11 | Clip | `min`/`max` → scalar inputs of the input's float type (absent bound: omitted input) |
//! | 11 | Pad | `pads` → int64 input, `value` → scalar input of the data's type; `mode` kept |
//! | 11 | Resize | (X, scales) → (X, roi, scales): `roi` empty (omitted from 13), `coordinate_transformation_mode` asymmetric, nearest: `nearest_mode` floor, or ceil when every scale ≤ 1 (ONNX Runtime's legacy rounding; blocker: constant scales that shrink and grow; scales not constant: floor) |
//! | 11 | Scatter (deprecated) | → ScatterElements |
//! | 12 | Dropout | `ratio` → input |
//! | 13 | Squeeze, Unsqueeze, ReduceSum | `axes` → int64 input (absent: no input, same meaning) |
//! | 13 | Split | `split` → int64 input |
//! | 13 | Softmax, LogSoftmax, Hardmax | old 2-D coercion at `axis` (default 1): `axis` = -1 when it is the input's last axis (rank known), else Shape → Flatten(axis) → op(axis = -1) → Reshape |
//! | 13 | Resize | `tf_half_pixel_for_nn` (removed) with floor / round_prefer_floor → `half_pixel` with round_prefer_ceil / ceil (blocker: other roundings or modes) |
//! | 14 | BatchNormalization | unread training outputs removed (blocker: one is read) |
//! | 16 | RoiAlign | `coordinate_transformation_mode` = output_half_pixel written (the default became half_pixel) |
//! | 18 | ReduceMean Max Min Prod L1 L2 LogSum LogSumExp SumSquare | `axes` → int64 input |
//! | 18 | Split | no `split` input: `num_outputs` = number of outputs |
//! | 20 | GridSample | mode bilinear → linear, bicubic → cubic |
//! | 20 | DFT | `axis` attribute (default 1) → input (default -2), always written |
//! | 21 | GroupNormalization | scale and bias per group → per channel (constants repeated when C is declared, else Reshape → Expand → Reshape) |
//!
//! Purely additive changes need no rewrite (new optional attributes whose default is the old
//! behaviour, new optional inputs/outputs, new types, negative axes): ArgMax/ArgMin 12
//! `select_last_index`; AveragePool 7 `count_include_pad`, 10 `ceil_mode`, 19 `dilations`;
//! MaxPool 8 `Indices`/`storage_order`, 10 `ceil_mode`/`dilations`; LpPool 18; Cast 9/13/19
//! (`saturate` only affects FLOAT8)/21; Max, Min, Sum, Mean 8 (broadcasting); PRelu 9/16;
//! Concat, Flatten, Gather, OneHot, Compress, Squeeze, Unsqueeze, Split 11 (negative axes);
//! DepthToSpace 11 `mode` (default DCR); TopK 11 `largest`/`sorted`; Gemm 9/11 (optional C);
//! QuantizeLinear/DequantizeLinear 13 `axis`, 19, 21 `block_size`/`output_dtype`; Reshape 14
//! `allowzero` (default 0); Shape 15 `start`/`end`; ScatterElements/ScatterND 16/18 `reduction`;
//! Pad 18 `axes`, 19 `wrap`; Resize 13/18/19 (`antialias`, `axes`, `keep_aspect_ratio_policy`,
//! half_pixel_symmetric); RNN/GRU/LSTM 14 `layout`; GroupNormalization 21 `stash_type`;
//! ReduceMax/ReduceMin 12/20 (types), and the type-only versions of the element-wise, logical,
//! control-flow and constant operators.

mod hints;
mod rewrite;

use crate::attribute::Attribute;
use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId, Operation};
use hints::Hints;
use rewrite::{Apply, Check, Env, label, no_check, nothing};
use std::collections::HashSet;
use std::fmt;

/// One change of operators between opsets: from opset `at`, `op_types` mean something else or
/// take another form than before, as `what` says.
pub struct OpsetChange {
    /// The operators concerned (`*`: every default-domain operator).
    pub op_types: &'static [&'static str],
    pub at: i64,
    pub what: &'static str,
    /// Deprecated or removed at `at`: converted whatever the operation's opset.
    pub removed: bool,
    /// The operator type the rewrite turns it into, when it changes.
    pub becomes: Option<&'static str>,
    check: Check,
    apply: Apply,
}

impl OpsetChange {
    const fn new(op_types: &'static [&'static str], at: i64, what: &'static str, check: Check, apply: Apply) -> Self {
        Self { op_types, at, what, removed: false, becomes: None, check, apply }
    }

    const fn removed(mut self, becomes: Option<&'static str>) -> Self {
        self.removed = true;
        self.becomes = becomes;
        self
    }

    fn concerns(&self, op_type: &str) -> bool {
        self.op_types.iter().any(|t| *t == "*" || *t == op_type)
    }
}

const LEGACY_BROADCAST: &[&str] = &["Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"];
const REDUCE_18: &[&str] = &[
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

use rewrite as r;

/// What changed where, oldest first (see the module documentation for the rewrites).
pub static CHANGES: &[OpsetChange] = &[
    OpsetChange::new(&["Pad"], 2, "`paddings` renamed `pads`", no_check, r::pad_paddings),
    OpsetChange::new(&["LpPool", "GlobalLpPool"], 2, "`p` became an int", r::check_lp_p, r::lp_p_int),
    OpsetChange::new(&["Split"], 2, "`split` input became an attribute", r::check_split_input, r::split_input_to_attr),
    OpsetChange::new(&["Concat"], 4, "`axis` became required (default was 1)", no_check, r::concat_axis),
    OpsetChange::new(&["Reshape"], 5, "`shape` attribute became an input", no_check, r::reshape_shape),
    OpsetChange::new(&["*"], 6, "`consumed_inputs` removed", no_check, r::drop_consumed_inputs),
    OpsetChange::new(&["Cast"], 6, "`to` became a type code", r::check_cast_to, r::cast_to_code),
    OpsetChange::new(&["Tile"], 6, "`tiles`/`axis` inputs became `repeats`", r::check_tile, nothing),
    OpsetChange::new(
        LEGACY_BROADCAST,
        7,
        "`broadcast`/`axis` removed: numpy broadcasting",
        r::check_legacy_broadcast,
        r::legacy_broadcast,
    ),
    OpsetChange::new(&["Gemm"], 7, "`broadcast` removed", no_check, r::gemm_broadcast),
    OpsetChange::new(
        &["PRelu"],
        7,
        "slope broadcasts the numpy way instead of per channel",
        r::check_prelu_slope,
        r::prelu_slope,
    ),
    OpsetChange::new(&["BatchNormalization", "Dropout"], 7, "`is_test` removed", no_check, r::drop_is_test),
    OpsetChange::new(&["RNN", "GRU", "LSTM"], 7, "`output_sequence` removed", no_check, r::drop_output_sequence),
    OpsetChange::new(
        &["Upsample"],
        7,
        "`height_scale`/`width_scale` became `scales`",
        no_check,
        r::upsample_scales_attr,
    ),
    OpsetChange::new(
        &["BatchNormalization"],
        9,
        "`spatial` removed (per-channel statistics only)",
        r::check_batchnorm_spatial,
        r::batchnorm_spatial,
    ),
    OpsetChange::new(
        &["MeanVarianceNormalization"],
        9,
        "`across_channels`/`normalize_variance` became `axes`",
        r::check_mvn,
        r::mvn_axes,
    ),
    OpsetChange::new(&["Upsample"], 9, "`scales` attribute became an input", no_check, r::upsample_scales_input),
    OpsetChange::new(&["Scan"], 9, "batch axis and `sequence_lens` removed", check_scan_8, nothing),
    OpsetChange::new(&["Upsample"], 10, "deprecated for Resize", no_check, r::upsample_to_resize)
        .removed(Some("Resize")),
    OpsetChange::new(&["Dropout"], 10, "mask output became boolean", r::check_dropout_mask, r::dropout_mask),
    OpsetChange::new(&["Slice"], 10, "`starts`/`ends`/`axes` became inputs", no_check, r::slice_attrs),
    OpsetChange::new(&["TopK"], 10, "`k` became an input", no_check, r::topk_k),
    OpsetChange::new(&["ImageScaler"], 10, "experimental, removed", no_check, r::image_scaler).removed(Some("Mul")),
    OpsetChange::new(&["Scale"], 10, "experimental, removed", no_check, r::scale_op).removed(Some("Mul")),
    OpsetChange::new(&["Affine"], 10, "experimental, removed", no_check, r::affine).removed(Some("Mul")),
    OpsetChange::new(&["ScaledTanh"], 10, "experimental, removed", no_check, r::scaled_activation)
        .removed(Some("Tanh")),
    OpsetChange::new(&["ParametricSoftplus"], 10, "experimental, removed", no_check, r::scaled_activation)
        .removed(Some("Softplus")),
    OpsetChange::new(&["DynamicSlice"], 10, "experimental, removed", no_check, r::dynamic_slice).removed(Some("Slice")),
    OpsetChange::new(
        &["Crop", "ATen", "GRUUnit", "GivenTensorFill"],
        10,
        "experimental, removed",
        r::check_removed,
        nothing,
    )
    .removed(None),
    OpsetChange::new(&["Clip"], 11, "`min`/`max` became inputs", no_check, r::clip_attrs),
    OpsetChange::new(&["Pad"], 11, "`pads`/`value` became inputs", no_check, r::pad_attrs),
    OpsetChange::new(
        &["Resize"],
        11,
        "`roi` input; coordinate transformation and nearest rounding became attributes",
        r::check_resize_legacy,
        r::resize_10_to_11,
    ),
    OpsetChange::new(&["Scatter"], 11, "deprecated for ScatterElements", no_check, r::scatter_to_elements)
        .removed(Some("ScatterElements")),
    OpsetChange::new(&["Dropout"], 12, "`ratio` became an input", no_check, r::dropout_ratio),
    OpsetChange::new(&["Squeeze", "Unsqueeze", "ReduceSum"], 13, "`axes` became an input", no_check, r::axes_to_input),
    OpsetChange::new(&["Split"], 13, "`split` became an input", no_check, r::split_attr_to_input),
    OpsetChange::new(
        &["Softmax", "LogSoftmax", "Hardmax"],
        13,
        "works along `axis` (default -1) instead of on the 2-D coercion at `axis` (default 1)",
        no_check,
        r::softmax_axis,
    ),
    OpsetChange::new(
        &["Resize"],
        13,
        "`tf_half_pixel_for_nn` removed",
        r::check_resize_tf_half_pixel,
        r::resize_tf_half_pixel,
    ),
    OpsetChange::new(
        &["BatchNormalization"],
        14,
        "running statistics written only in training mode",
        r::check_batchnorm_outputs,
        r::batchnorm_outputs,
    ),
    OpsetChange::new(
        &["RoiAlign"],
        16,
        "default coordinate transformation became half_pixel",
        no_check,
        r::roialign_mode,
    ),
    OpsetChange::new(REDUCE_18, 18, "`axes` became an input", no_check, r::axes_to_input),
    OpsetChange::new(&["Split"], 18, "equal parts need `num_outputs`", no_check, r::split_num_outputs),
    OpsetChange::new(&["GridSample"], 20, "modes renamed linear/cubic", no_check, r::gridsample_mode),
    OpsetChange::new(&["DFT"], 20, "`axis` became an input (default -2)", no_check, r::dft_axis),
    OpsetChange::new(
        &["GroupNormalization"],
        21,
        "scale and bias per channel instead of per group",
        no_check,
        r::groupnorm_per_channel,
    ),
];

fn check_scan_8(_: &Graph, _: &Env, _: &Operation) -> Option<String> {
    Some("Scan-8's batch axis and `sequence_lens` have no conversion here: re-export at opset ≥ 9".into())
}

/// One operation rewritten by [`upgrade_opset`].
#[derive(Clone, Debug, PartialEq)]
pub struct OpsetRewrite {
    /// The operation's name (its first output's when it has none).
    pub op: String,
    /// Its type before the upgrade.
    pub op_type: String,
    /// The opset of the change.
    pub at: i64,
    pub change: String,
}

impl fmt::Display for OpsetRewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({}, opset {}): {}", self.op, self.op_type, self.at, self.change)
    }
}

/// What [`upgrade_opset`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpsetUpgrade {
    pub from: i64,
    pub to: i64,
    /// Every rewrite, in graph order (an operation can appear once per change it crossed).
    pub rewrites: Vec<OpsetRewrite>,
}

impl OpsetUpgrade {
    /// Rewritten operations per original type, in first-seen order.
    pub fn counts(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, Vec<&str>)> = Vec::new();
        for r in &self.rewrites {
            match counts.iter_mut().find(|(t, _)| *t == r.op_type) {
                Some((_, ops)) if ops.contains(&r.op.as_str()) => {}
                Some((_, ops)) => ops.push(&r.op),
                None => counts.push((r.op_type.clone(), vec![&r.op])),
            }
        }
        counts.into_iter().map(|(t, ops)| (t, ops.len())).collect()
    }
}

impl fmt::Display for OpsetUpgrade {
    /// One line: `opset 12 → 13: rewrote 7 Squeeze, 3 Softmax`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opset {} → {}: ", self.from, self.to)?;
        let counts = self.counts();
        if counts.is_empty() {
            return f.write_str("no operation needed rewriting");
        }
        let list: Vec<String> = counts.iter().map(|(t, n)| format!("{n} {t}")).collect();
        write!(f, "rewrote {}", list.join(", "))
    }
}

/// An operation [`upgrade_opset`] cannot convert.
#[derive(Clone, Debug, PartialEq)]
pub struct OpsetBlocker {
    pub op: String,
    pub op_type: String,
    /// The operation's opset.
    pub opset: i64,
    /// The opset of the change it cannot cross.
    pub at: i64,
    /// Why, and what would fix it.
    pub why: String,
}

impl fmt::Display for OpsetBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "operation `{}` ({}, opset {}) cannot be converted past opset {}: {}",
            self.op, self.op_type, self.opset, self.at, self.why
        )
    }
}

/// The opset an operation is interpreted under (operations built in memory may leave it 0).
fn opset_of(op: &Operation, from: i64) -> i64 {
    if op.opset > 0 { op.opset } else { from }
}

/// The next change operation type `op_type` at opset `cur` crosses on the way to `to`.
fn next_change(op_type: &str, cur: i64, to: i64, done: &[usize]) -> Option<(usize, &'static OpsetChange)> {
    CHANGES
        .iter()
        .enumerate()
        .filter(|(i, c)| !done.contains(i) && c.at <= to && (c.at > cur || c.removed) && c.concerns(op_type))
        .min_by_key(|(_, c)| c.at)
}

fn subgraphs(op: &Operation) -> impl Iterator<Item = &Graph> {
    op.attributes.values().flat_map(|a| match a {
        Attribute::Graph(g) => std::slice::from_ref(g.as_ref()),
        Attribute::Graphs(gs) => gs.as_slice(),
        _ => &[],
    })
}

/// The operations of `graph` (and its sub-graphs) that cannot be converted from opset `from`
/// to `to`, each with why and what would fix it. Empty when [`upgrade_opset`] would succeed.
pub fn blockers(graph: &Graph, from: i64, to: i64) -> Vec<OpsetBlocker> {
    let mut out = Vec::new();
    collect_blockers(graph, from, to, &mut out);
    out
}

fn collect_blockers(graph: &Graph, from: i64, to: i64, out: &mut Vec<OpsetBlocker>) {
    let mut env: Option<Env> = None;
    for (_, op) in graph.operations() {
        for sub in subgraphs(op) {
            collect_blockers(sub, from, to, out);
        }
        if !op.in_default_domain() {
            continue;
        }
        let opset = opset_of(op, from);
        let (mut op_type, mut cur, mut done) = (op.op_type.clone(), opset, Vec::new());
        while let Some((i, change)) = next_change(&op_type, cur, to, &done) {
            done.push(i);
            let env = env.get_or_insert_with(|| Env { to, hints: Hints::of(graph), outer: HashSet::new() });
            if let Some(why) = (change.check)(graph, env, op) {
                let blocker =
                    OpsetBlocker { op: label(graph, op), op_type: op.op_type.clone(), opset, at: change.at, why };
                out.push(blocker);
                break;
            }
            if let Some(b) = change.becomes {
                op_type = b.to_string();
            }
            cur = cur.max(change.at);
        }
    }
}

/// Converts every default-domain operation of `graph` and of its sub-graphs from opset `from`
/// (an operation's own `opset` when set) to `to`: operations whose form or meaning changed on
/// the way are rewritten (see [`CHANGES`]), new operations are written at `to`, and every
/// default-domain operation ends with `opset = to` (never lowered). Refuses, leaving the graph
/// untouched, with [`IrError::OpsetBlocked`] when [`blockers`] finds an operation it cannot
/// convert. An attribute of the wrong kind met while rewriting is an error too (the graph is then
/// partly converted). The model's opset import is the caller's to update.
pub fn upgrade_opset(graph: &mut Graph, from: i64, to: i64) -> Result<OpsetUpgrade> {
    let blocked = blockers(graph, from, to);
    if !blocked.is_empty() {
        return Err(IrError::OpsetBlocked { graph: graph.name.clone(), from, to, blockers: blocked });
    }
    let mut rewrites = Vec::new();
    upgrade_graph(graph, from, to, &HashSet::new(), &mut rewrites)?;
    Ok(OpsetUpgrade { from, to, rewrites })
}

fn upgrade_graph(
    graph: &mut Graph,
    from: i64,
    to: i64,
    outer: &HashSet<String>,
    rewrites: &mut Vec<OpsetRewrite>,
) -> Result<()> {
    let ids: Vec<OpId> = graph.operations().map(|(id, _)| id).collect();
    let mut scope: Option<HashSet<String>> = None;
    for id in &ids {
        if subgraphs(graph.operation(*id)?).next().is_none() {
            continue;
        }
        // Names a sub-graph must not reuse: ours and those of the enclosing graphs.
        let scope = scope
            .get_or_insert_with(|| {
                let mut s = outer.clone();
                s.extend(graph.variables().map(|(_, v)| v.name.clone()));
                s
            })
            .clone();
        for attribute in graph.operation_mut(*id)?.attributes.values_mut() {
            match attribute {
                Attribute::Graph(body) => upgrade_graph(body, from, to, &scope, rewrites)?,
                Attribute::Graphs(bodies) => {
                    for body in bodies {
                        upgrade_graph(body, from, to, &scope, rewrites)?;
                    }
                }
                _ => {}
            }
        }
    }
    let env = Env { to, hints: Hints::of(graph), outer: outer.clone() };
    for id in ids {
        let op = graph.operation(id)?;
        if !op.in_default_domain() {
            continue;
        }
        let (name, op_type) = (label(graph, op), op.op_type.clone());
        let (mut cur, mut done) = (opset_of(op, from), Vec::new());
        while let Some((i, change)) = next_change(&graph.operation(id)?.op_type, cur, to, &done) {
            done.push(i);
            if let Some(what) = (change.apply)(graph, &env, id)? {
                rewrites.push(OpsetRewrite { op: name.clone(), op_type: op_type.clone(), at: change.at, change: what });
            }
            cur = cur.max(change.at);
        }
        let op = graph.operation_mut(id)?;
        op.opset = op.opset.max(to);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
