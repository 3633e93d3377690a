//! The rewrites of the opset upgrade, one function per row of the parent module's table:
//! `check_*` says why an operation cannot be converted (a blocker, with what would fix it);
//! the others rewrite the operation and say what they did (`None`: nothing to do, e.g. an
//! optional attribute that was absent).

use super::hints::{Hints, const_ints, const_value};
use crate::attribute::Attribute;
use crate::dtype::DataType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, OpId, Operation, VarId, Variable};
use crate::tensor::TensorData;
use crate::value_type::Dim;
use std::collections::HashSet;

/// What every rewrite of one graph reads.
pub(super) struct Env {
    /// The opset being converted to: operations created here are written for it.
    pub to: i64,
    pub hints: Hints,
    /// Names of the enclosing graphs, which a sub-graph must not reuse.
    pub outer: HashSet<String>,
}

/// Why an operation cannot be converted, if it cannot.
pub(super) type Check = fn(&Graph, &Env, &Operation) -> Option<String>;
/// Rewrites an operation; says what it did.
pub(super) type Apply = fn(&mut Graph, &Env, OpId) -> Result<Option<String>>;

pub(super) fn no_check(_: &Graph, _: &Env, _: &Operation) -> Option<String> {
    None
}

pub(super) fn nothing(_: &mut Graph, _: &Env, _: OpId) -> Result<Option<String>> {
    Ok(None)
}

fn input(op: &Operation, i: usize) -> Option<VarId> {
    op.inputs().get(i).copied().flatten()
}

/// The operation's name, or its first output's when it has none (for messages and new names).
pub(super) fn label(g: &Graph, op: &Operation) -> String {
    if !op.name.is_empty() {
        return op.name.clone();
    }
    op.output_ids().next().map_or_else(|| op.op_type.clone(), |v| g.var_name(v).to_string())
}

fn err(g: &Graph, op: &Operation, message: impl Into<String>) -> IrError {
    IrError::Morph { morph: "upgrade_opset", op: label(g, op), message: message.into() }
}

/// A variable name unused in this graph and in the enclosing ones.
fn fresh(g: &Graph, env: &Env, base: &str) -> String {
    let taken = |n: &str| g.var_id(n).is_some() || env.outer.contains(n);
    if !taken(base) {
        return base.to_string();
    }
    (1..).map(|i| format!("{base}_{i}")).find(|n| !taken(n)).unwrap_or_default()
}

fn new_var(g: &mut Graph, env: &Env, base: &str) -> Result<VarId> {
    let name = fresh(g, env, base);
    g.add_variable(Variable::new(name))
}

/// An initializer named after operation `id` and `what`.
fn add_const(g: &mut Graph, env: &Env, id: OpId, what: &str, value: TensorData) -> Result<VarId> {
    let base = format!("{}_{what}", label(g, g.operation(id)?));
    let name = fresh(g, env, &base);
    g.add_initializer(name, value)
}

fn new_op(g: &Graph, env: &Env, op_type: &str, base: &str) -> Operation {
    Operation::new(op_type, g.fresh_op_name(base)).with_opset(env.to)
}

fn ints(values: &[i64]) -> Result<TensorData> {
    TensorData::from_vec(vec![values.len()], values)
}

/// A scalar of a float type (`Float` when the type is not a float one).
fn scalar(dtype: DataType, value: f32) -> Result<TensorData> {
    let dtype = if dtype.is_float() { dtype } else { DataType::Float };
    TensorData::from_f32_as(dtype, Vec::new(), &[value])
}

/// The float element type of `var` as far as known (`Float` otherwise: the old forms of Clip,
/// Pad and the removed image operators only took float types).
fn float_type(env: &Env, var: Option<VarId>) -> DataType {
    var.and_then(|v| env.hints.dtype(v)).filter(|d| d.is_float()).unwrap_or(DataType::Float)
}

fn trim_inputs(g: &mut Graph, id: OpId) -> Result<()> {
    let op = g.operation_mut(id)?;
    while op.inputs.last() == Some(&None) {
        op.inputs.pop();
    }
    Ok(())
}

/// Puts `var` at input `slot` of operation `id`, adding omitted inputs before it.
fn set_input(g: &mut Graph, id: OpId, slot: usize, var: Option<VarId>) -> Result<()> {
    while g.operation(id)?.inputs().len() <= slot {
        g.push_op_input(id, None)?;
    }
    g.set_op_input(id, slot, var)?;
    trim_inputs(g, id)
}

/// Omits output `slot` of operation `id`; its variable is removed.
fn clear_output(g: &mut Graph, id: OpId, slot: usize) -> Result<()> {
    let op = g.operation_mut(id)?;
    let Some(Some(var)) = op.outputs.get(slot).copied() else { return Ok(()) };
    op.outputs[slot] = None;
    while op.outputs.last() == Some(&None) {
        op.outputs.pop();
    }
    g.variable_mut(var)?.producer = None;
    g.remove_variable(var).map(|_| ())
}

fn take_attr(g: &mut Graph, id: OpId, name: &str) -> Result<Option<Attribute>> {
    Ok(g.operation_mut(id)?.attributes.shift_remove(name))
}

fn take_ints(g: &mut Graph, id: OpId, name: &str) -> Result<Option<Vec<i64>>> {
    take_attr(g, id, name)?.map(|a| a.as_ints(name).map(<[i64]>::to_vec)).transpose()
}

fn take_float(g: &mut Graph, id: OpId, name: &str) -> Result<Option<f32>> {
    take_attr(g, id, name)?.map(|a| a.as_float(name)).transpose()
}

fn set_attr(g: &mut Graph, id: OpId, name: &str, value: Attribute) -> Result<()> {
    g.operation_mut(id)?.attributes.insert(name.to_string(), value);
    Ok(())
}

fn string_attr(value: &str) -> Attribute {
    Attribute::String(value.as_bytes().to_vec())
}

fn drop_attr(g: &mut Graph, id: OpId, name: &str) -> Result<Option<String>> {
    Ok(take_attr(g, id, name)?.map(|_| format!("dropped `{name}`")))
}

/// Moves the ints attribute `name` to input `slot` as a 1-D int64 initializer.
fn attr_to_input(g: &mut Graph, env: &Env, id: OpId, name: &str, slot: usize) -> Result<Option<String>> {
    let Some(values) = take_ints(g, id, name)? else { return Ok(None) };
    let var = add_const(g, env, id, name, ints(&values)?)?;
    set_input(g, id, slot, Some(var))?;
    Ok(Some(format!("`{name}` {values:?} → input {slot}")))
}

/// Makes operation `id` write a fresh variable that `next` reads (then `extra`) to write what
/// `id` wrote: readers, graph outputs and names stay. Returns the fresh variable.
fn chain_after(g: &mut Graph, env: &Env, id: OpId, next: Operation, extra: &[Option<VarId>]) -> Result<VarId> {
    let op = g.operation(id)?;
    let out = op.outputs().first().copied().flatten().ok_or_else(|| err(g, op, "has no output"))?;
    let mid = new_var(g, env, &format!("{}_{}", g.var_name(out), op.op_type.to_lowercase()))?;
    g.set_op_output(id, 0, mid)?;
    let mut inputs = vec![Some(mid)];
    inputs.extend_from_slice(extra);
    g.add_operation(next, &inputs, &[Some(out)])?;
    Ok(mid)
}

/// Puts `prev` (reading input `slot` of `id`, then `extra`) in front of that input.
fn chain_before(
    g: &mut Graph,
    env: &Env,
    id: OpId,
    slot: usize,
    prev: Operation,
    extra: &[Option<VarId>],
) -> Result<()> {
    let op = g.operation(id)?;
    let x = input(op, slot).ok_or_else(|| err(g, op, format!("has no input {slot}")))?;
    let mid = new_var(g, env, &format!("{}_{}", g.var_name(x), prev.op_type.to_lowercase()))?;
    let mut inputs = vec![Some(x)];
    inputs.extend_from_slice(extra);
    g.add_operation(prev, &inputs, &[Some(mid)])?;
    g.set_op_input(id, slot, Some(mid))
}

// ---- before opset 7 -------------------------------------------------------------------------

/// `consumed_inputs` (until opset 5): an in-place hint without effect on the result.
pub(super) fn drop_consumed_inputs(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    drop_attr(g, id, "consumed_inputs")
}

fn type_named(name: &[u8]) -> Option<DataType> {
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    DataType::ALL.iter().copied().find(|d| d.onnx_name() == name)
}

pub(super) fn check_cast_to(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    match op.attr("to") {
        Some(Attribute::String(s)) if type_named(s).is_none() => {
            Some(format!("`to` = {:?} names no ONNX type", String::from_utf8_lossy(s)))
        }
        _ => None,
    }
}

/// Cast-1's `to` is a type name; from opset 6 a type code.
pub(super) fn cast_to_code(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let Some(Attribute::String(name)) = op.attr("to") else { return Ok(None) };
    let dtype = type_named(name).ok_or_else(|| err(g, op, "`to` names no ONNX type"))?;
    set_attr(g, id, "to", Attribute::Int(i64::from(dtype.onnx_code())))?;
    Ok(Some(format!("`to` {} given as its code", dtype.onnx_name())))
}

/// Concat-1's `axis` defaulted to 1; from opset 4 it is required.
pub(super) fn concat_axis(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    if g.operation(id)?.attr("axis").is_some() {
        return Ok(None);
    }
    set_attr(g, id, "axis", Attribute::Int(1))?;
    Ok(Some("`axis` = 1 written (its old default)".into()))
}

/// Pad-1's `paddings` is Pad-2's `pads`.
pub(super) fn pad_paddings(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let Some(a) = take_attr(g, id, "paddings")? else { return Ok(None) };
    set_attr(g, id, "pads", a)?;
    Ok(Some("`paddings` renamed `pads`".into()))
}

pub(super) fn check_lp_p(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    match op.attr("p") {
        Some(Attribute::Float(p)) if p.fract() != 0.0 => {
            Some(format!("p = {p} is not an integer (an int from opset 2)"))
        }
        _ => None,
    }
}

/// LpPool-1's float `p` is an int from opset 2.
pub(super) fn lp_p_int(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let Some(Attribute::Float(p)) = g.operation(id)?.attr("p").cloned() else { return Ok(None) };
    set_attr(g, id, "p", Attribute::Int(p as i64))?;
    Ok(Some(format!("`p` = {p} written as an int")))
}

/// Reshape-1's `shape` attribute is Reshape-5's second input.
pub(super) fn reshape_shape(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    attr_to_input(g, env, id, "shape", 1)
}

pub(super) fn check_split_input(g: &Graph, _: &Env, op: &Operation) -> Option<String> {
    match input(op, 1) {
        Some(v) if const_ints(g, v).is_none() => {
            Some("its `split` input is not a constant (an attribute from opset 2): fold it to a constant first".into())
        }
        _ => None,
    }
}

/// Split-1's optional `split` input is an attribute from opset 2.
pub(super) fn split_input_to_attr(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let Some(v) = input(op, 1) else { return Ok(None) };
    let values = const_ints(g, v).ok_or_else(|| err(g, op, "`split` input is not a constant"))?;
    g.set_op_input(id, 1, None)?;
    trim_inputs(g, id)?;
    set_attr(g, id, "split", Attribute::Ints(values.clone()))?;
    Ok(Some(format!("`split` input {values:?} → attribute")))
}

pub(super) fn check_tile(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    (op.inputs().len() > 2)
        .then(|| "Tile-1's `tiles`/`axis` inputs have no conversion here: re-export at opset ≥ 6".into())
}

/// Old broadcasting (`broadcast` = 1, B aligned at `axis`): how many trailing unit dimensions
/// B needs to broadcast the numpy way.
fn legacy_trailing(env: &Env, op: &Operation) -> std::result::Result<usize, String> {
    let axis = op.attr_int("axis", 0).map_err(|e| e.to_string())?;
    let (Some(a), Some(b)) = (input(op, 0), input(op, 1)) else { return Err("has fewer than two inputs".into()) };
    let (Some(ra), Some(rb)) = (env.hints.rank(a), env.hints.rank(b)) else {
        return Err(format!(
            "broadcasts B at `axis` = {axis} (before opset 7) and the ranks of A and B are unknown: \
             declare the input shapes or re-export at opset ≥ 7"
        ));
    };
    let start = if axis < 0 { axis + ra as i64 } else { axis };
    let trailing = ra as i64 - start - rb as i64;
    if start < 0 || trailing < 0 {
        return Err(format!("`axis` = {axis} does not place a rank-{rb} B inside a rank-{ra} A"));
    }
    Ok(trailing as usize)
}

pub(super) fn check_legacy_broadcast(_: &Graph, env: &Env, op: &Operation) -> Option<String> {
    let aligned = op.attr_int("broadcast", 0).ok() == Some(1) && op.attr("axis").is_some();
    if aligned { legacy_trailing(env, op).err() } else { None }
}

/// B with `n` trailing unit dimensions: a reshaped copy of a constant, else an Unsqueeze.
fn unsqueeze_trailing(g: &mut Graph, env: &Env, id: OpId, b: VarId, n: usize) -> Result<VarId> {
    if let Some(value) = const_value(g, b) {
        let mut shape = value.shape().to_vec();
        shape.extend(std::iter::repeat_n(1, n));
        return add_const(g, env, id, "B", value.reshaped(shape)?);
    }
    let rb = env.hints.rank(b).unwrap_or(0);
    let axes: Vec<i64> = (rb..rb + n).map(|a| a as i64).collect();
    let out = new_var(g, env, &format!("{}_unsqueezed", g.var_name(b)))?;
    let mut op = new_op(g, env, "Unsqueeze", &format!("{}_unsqueeze", label(g, g.operation(id)?)));
    let mut inputs = vec![Some(b)];
    if env.to >= 13 {
        inputs.push(Some(add_const(g, env, id, "axes", ints(&axes)?)?));
    } else {
        op = op.with_attr("axes", Attribute::Ints(axes));
    }
    g.add_operation(op, &inputs, &[Some(out)])?;
    Ok(out)
}

/// Element-wise operators before opset 7: `broadcast` = 1 aligned B at `axis` (or at the end);
/// from 7 broadcasting is numpy's, which aligns at the end.
pub(super) fn legacy_broadcast(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    if op.attr("broadcast").is_none() && op.attr("axis").is_none() {
        return Ok(None);
    }
    let mut what = "dropped `broadcast`/`axis` (numpy broadcasting from opset 7)".to_string();
    if op.attr_int("broadcast", 0)? == 1 && op.attr("axis").is_some() {
        let trailing = legacy_trailing(env, op).map_err(|m| err(g, op, m))?;
        if trailing > 0 {
            let b = input(op, 1).ok_or_else(|| err(g, op, "has no input B"))?;
            let b = unsqueeze_trailing(g, env, id, b, trailing)?;
            g.set_op_input(id, 1, Some(b))?;
            what = format!("B given {trailing} trailing unit dimension(s) for its old `axis` alignment; {what}");
        }
    }
    take_attr(g, id, "broadcast")?;
    take_attr(g, id, "axis")?;
    Ok(Some(what))
}

/// PRelu before 7: a 1-D slope of C > 1 values applies per channel (axis 1); from 7 the slope
/// broadcasts the numpy way (aligned at the last axis). How many trailing unit dimensions the
/// slope needs (`None`: none, or not a 1-D slope).
fn prelu_trailing(g: &Graph, env: &Env, op: &Operation) -> std::result::Result<Option<usize>, String> {
    let (Some(x), Some(slope)) = (input(op, 0), input(op, 1)) else { return Ok(None) };
    if env.hints.rank(slope) != Some(1) || const_value(g, slope).is_some_and(|v| v.len() == 1) {
        return Ok(None);
    }
    match env.hints.rank(x) {
        Some(r) => Ok(r.checked_sub(2).filter(|n| *n > 0)),
        None => Err("a per-channel slope (before opset 7) on an input of unknown rank: declare the input shape".into()),
    }
}

pub(super) fn check_prelu_slope(g: &Graph, env: &Env, op: &Operation) -> Option<String> {
    prelu_trailing(g, env, op).err()
}

pub(super) fn prelu_slope(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let Some(n) = prelu_trailing(g, env, op).map_err(|m| err(g, op, m))? else { return Ok(None) };
    let slope = input(op, 1).ok_or_else(|| err(g, op, "has no slope"))?;
    let slope = unsqueeze_trailing(g, env, id, slope, n)?;
    g.set_op_input(id, 1, Some(slope))?;
    Ok(Some(format!("per-channel slope given {n} trailing unit dimension(s)")))
}

/// Gemm before 7: `broadcast` allowed C to broadcast; from 7 it always may.
pub(super) fn gemm_broadcast(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    drop_attr(g, id, "broadcast")
}

/// `is_test` (BatchNormalization, Dropout before 7): inference is what remains.
pub(super) fn drop_is_test(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    drop_attr(g, id, "is_test")
}

/// RNN/GRU/LSTM before 7: `output_sequence` is implied by whether output Y is requested.
pub(super) fn drop_output_sequence(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    drop_attr(g, id, "output_sequence")
}

/// Experimental operators removed at opset 10 without replacement here.
pub(super) fn check_removed(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    Some(format!(
        "the experimental operator {} was removed at opset 10 and has no conversion here: replace it before quantizing",
        op.op_type
    ))
}

fn scalar_const(g: &mut Graph, env: &Env, id: OpId, what: &str, value: f32) -> Result<VarId> {
    let dtype = float_type(env, input(g.operation(id)?, 0));
    add_const(g, env, id, what, scalar(dtype, value)?)
}

/// Turns operation `id` into `Mul(x, factor)`, keeping its first input and its output.
fn become_mul(g: &mut Graph, env: &Env, id: OpId, what: &str, factor: f32) -> Result<()> {
    let k = scalar_const(g, env, id, what, factor)?;
    let op = g.operation_mut(id)?;
    op.op_type = "Mul".into();
    op.attributes.clear();
    set_input(g, id, 1, Some(k))
}

/// ImageScaler (removed at 10): `scale · x + bias[c]` on NCHW → Mul, Add.
pub(super) fn image_scaler(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let scale = op.attr_float("scale", 1.0)?;
    let bias = op.attr("bias").map(|a| a.as_floats("bias").map(<[f32]>::to_vec)).transpose()?;
    let dtype = float_type(env, input(op, 0));
    let name = label(g, op);
    become_mul(g, env, id, "scale", scale)?;
    if let Some(bias) = bias {
        let b = add_const(g, env, id, "bias", TensorData::from_f32_as(dtype, vec![1, bias.len(), 1, 1], &bias)?)?;
        let add = new_op(g, env, "Add", &format!("{name}_bias"));
        chain_after(g, env, id, add, &[Some(b)])?;
    }
    Ok(Some("ImageScaler → Mul (scale), Add (per-channel bias)".into()))
}

/// Scale (removed at 10): `scale · x` → Mul.
pub(super) fn scale_op(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let scale = g.operation(id)?.attr_float("scale", 1.0)?;
    become_mul(g, env, id, "scale", scale)?;
    Ok(Some("Scale → Mul".into()))
}

/// Affine (removed at 10): `alpha · x + beta` → Mul, Add.
pub(super) fn affine(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let (alpha, beta) = (op.attr_float("alpha", 1.0)?, op.attr_float("beta", 0.0)?);
    let name = label(g, op);
    become_mul(g, env, id, "alpha", alpha)?;
    let b = scalar_const(g, env, id, "beta", beta)?;
    let add = new_op(g, env, "Add", &format!("{name}_beta"));
    chain_after(g, env, id, add, &[Some(b)])?;
    Ok(Some("Affine → Mul, Add".into()))
}

/// ScaledTanh / ParametricSoftplus (removed at 10): `alpha · f(beta · x)` → Mul, f, Mul.
pub(super) fn scaled_activation(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let f = if op.op_type == "ScaledTanh" { "Tanh" } else { "Softplus" };
    let old = op.op_type.clone();
    let (alpha, beta) = (op.attr_float("alpha", 1.0)?, op.attr_float("beta", 1.0)?);
    let name = label(g, op);
    let b = scalar_const(g, env, id, "beta", beta)?;
    let a = scalar_const(g, env, id, "alpha", alpha)?;
    let pre = new_op(g, env, "Mul", &format!("{name}_beta"));
    chain_before(g, env, id, 0, pre, &[Some(b)])?;
    let post = new_op(g, env, "Mul", &format!("{name}_alpha"));
    chain_after(g, env, id, post, &[Some(a)])?;
    let op = g.operation_mut(id)?;
    op.op_type = f.into();
    op.attributes.clear();
    Ok(Some(format!("{old} → Mul, {f}, Mul")))
}

/// DynamicSlice (removed at 10) is Slice-10 without `steps`.
pub(super) fn dynamic_slice(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    g.operation_mut(id)?.op_type = "Slice".into();
    Ok(Some("DynamicSlice → Slice".into()))
}

// ---- opsets 7 to 12 -------------------------------------------------------------------------

pub(super) fn check_batchnorm_spatial(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    (op.attr_int("spatial", 1).ok() == Some(0)).then(|| {
        "`spatial` = 0 (statistics per element, not per channel) has no form from opset 9: \
         re-export with per-channel statistics"
            .into()
    })
}

/// BatchNormalization before 9: `spatial` = 1 (the default) is what remains.
pub(super) fn batchnorm_spatial(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    drop_attr(g, id, "spatial")
}

/// Whether output `slot` of `op` is read by an operation or is a graph output.
fn output_read(g: &Graph, op: &Operation, slot: usize) -> Option<VarId> {
    op.outputs().get(slot).copied().flatten().filter(|v| !g.consumers(*v).is_empty() || g.is_graph_output(*v))
}

pub(super) fn check_batchnorm_outputs(g: &Graph, _: &Env, op: &Operation) -> Option<String> {
    (1..op.outputs().len()).find_map(|s| output_read(g, op, s)).map(|v| {
        format!(
            "its training output `{}` is read; from opset 14 BatchNormalization writes running statistics only \
             with training_mode = 1: export the model in inference mode",
            g.var_name(v)
        )
    })
}

/// BatchNormalization before 14: unread training outputs (mean, var, saved mean/var) removed.
pub(super) fn batchnorm_outputs(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let n = g.operation(id)?.outputs().len();
    if n <= 1 {
        return Ok(None);
    }
    for slot in (1..n).rev() {
        clear_output(g, id, slot)?;
    }
    Ok(Some("unread training outputs removed".into()))
}

pub(super) fn check_dropout_mask(g: &Graph, _: &Env, op: &Operation) -> Option<String> {
    output_read(g, op, 1).map(|v| {
        format!("its mask `{}` is read; the mask became boolean at opset 10: remove the Dropout", g.var_name(v))
    })
}

/// Dropout before 10: the (unread) mask output changes type; a declared type goes.
pub(super) fn dropout_mask(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let Some(mask) = g.operation(id)?.outputs().get(1).copied().flatten() else { return Ok(None) };
    Ok(g.variable_mut(mask)?.ty.take().map(|_| "declared type of the mask dropped (boolean from opset 10)".into()))
}

/// Dropout before 12: `ratio` attribute → input (inference ignores it either way).
pub(super) fn dropout_ratio(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let Some(ratio) = take_float(g, id, "ratio")? else { return Ok(None) };
    let r = add_const(g, env, id, "ratio", TensorData::scalar(ratio))?;
    set_input(g, id, 1, Some(r))?;
    Ok(Some(format!("`ratio` {ratio} → input")))
}

/// Upsample-1: `height_scale`/`width_scale` on NCHW → Upsample-7's `scales`; `bilinear` → `linear`.
pub(super) fn upsample_scales_attr(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let h = take_float(g, id, "height_scale")?;
    let w = take_float(g, id, "width_scale")?;
    let mut what = Vec::new();
    if h.is_some() || w.is_some() {
        let scales = vec![1.0, 1.0, h.unwrap_or(1.0), w.unwrap_or(1.0)];
        set_attr(g, id, "scales", Attribute::Floats(scales))?;
        what.push("`height_scale`/`width_scale` → `scales`");
    }
    if g.operation(id)?.attr_string("mode", "nearest")? == "bilinear" {
        set_attr(g, id, "mode", string_attr("linear"))?;
        what.push("mode bilinear → linear");
    }
    Ok((!what.is_empty()).then(|| what.join(", ")))
}

/// Upsample-7's `scales` attribute → Upsample-9's second input.
pub(super) fn upsample_scales_input(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let Some(a) = take_attr(g, id, "scales")? else { return Ok(None) };
    let scales = a.as_floats("scales")?.to_vec();
    let s = add_const(g, env, id, "scales", TensorData::from_vec(vec![scales.len()], &scales)?)?;
    set_input(g, id, 1, Some(s))?;
    Ok(Some(format!("`scales` {scales:?} → input")))
}

/// Upsample (deprecated at 10) is Resize-10 with the same inputs and mode.
pub(super) fn upsample_to_resize(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    g.operation_mut(id)?.op_type = "Resize".into();
    Ok(Some("Upsample → Resize".into()))
}

/// The scales of a legacy resize (Upsample-7's attribute, or a constant input).
fn legacy_scales(g: &Graph, op: &Operation) -> Option<Vec<f32>> {
    if let Some(Attribute::Floats(s)) = op.attr("scales") {
        return Some(s.clone());
    }
    const_value(g, input(op, 1)?)?.to_f32_vec().ok()
}

/// The `nearest_mode` that makes Resize-11 round as ONNX Runtime rounds legacy nearest
/// resizing (Upsample, Resize-10): down on an axis that grows, up on one that shrinks. Scales
/// that are not constant are taken as growing (what Upsample is used for).
fn legacy_nearest_mode(g: &Graph, op: &Operation) -> std::result::Result<&'static str, String> {
    let Some(scales) = legacy_scales(g, op) else { return Ok("floor") };
    match (scales.iter().any(|s| *s < 1.0), scales.iter().any(|s| *s > 1.0)) {
        (true, true) => Err(format!(
            "nearest resize with scales {scales:?} shrinks some axes and grows others: legacy Upsample/Resize-10 \
             rounds per axis, Resize-11 with one `nearest_mode`; resize in two steps"
        )),
        (true, false) => Ok("ceil"),
        _ => Ok("floor"),
    }
}

pub(super) fn check_resize_legacy(g: &Graph, _: &Env, op: &Operation) -> Option<String> {
    if op.attr_string("mode", "nearest").ok()? != "nearest" {
        return None;
    }
    legacy_nearest_mode(g, op).err()
}

/// Resize-10 (`X, scales`, asymmetric coordinates) → Resize-11 (`X, roi, scales`, coordinate
/// transformation and rounding spelled out).
pub(super) fn resize_10_to_11(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let scales = input(op, 1);
    let mode = op.attr_string("mode", "nearest")?;
    let rounding = if mode == "nearest" { Some(legacy_nearest_mode(g, op).map_err(|m| err(g, op, m))?) } else { None };
    let dynamic = scales.is_some_and(|s| const_value(g, s).is_none());
    // Resize-11 and -12 need an `roi` tensor even when unused; from 13 it may be omitted.
    let roi = if env.to >= 13 {
        None
    } else {
        Some(add_const(g, env, id, "roi", TensorData::from_vec::<f32>(vec![0], &[])?)?)
    };
    set_input(g, id, 2, scales)?;
    set_input(g, id, 1, roi)?;
    set_attr(g, id, "coordinate_transformation_mode", string_attr("asymmetric"))?;
    let mut what = "(X, scales) → (X, roi, scales), asymmetric coordinates".to_string();
    if let Some(r) = rounding {
        set_attr(g, id, "nearest_mode", string_attr(r))?;
        what.push_str(&format!(", nearest_mode {r}"));
        if dynamic {
            what.push_str(" (scales not constant: taken as upsampling)");
        }
    }
    Ok(Some(what))
}

/// Scatter (deprecated at 11) is ScatterElements.
pub(super) fn scatter_to_elements(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    g.operation_mut(id)?.op_type = "ScatterElements".into();
    Ok(Some("Scatter → ScatterElements".into()))
}

/// MeanVarianceNormalization before 9 (experimental): `across_channels` → `axes`;
/// `normalize_variance` = 0 has no counterpart.
pub(super) fn check_mvn(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    (op.attr_int("normalize_variance", 1).ok() == Some(0))
        .then(|| "`normalize_variance` = 0 has no form from opset 9: replace it by ReduceMean and Sub".into())
}

pub(super) fn mvn_axes(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let across = take_attr(g, id, "across_channels")?;
    let normalize = take_attr(g, id, "normalize_variance")?;
    if across.is_none() && normalize.is_none() {
        return Ok(None);
    }
    if across.map(|a| a.as_int("across_channels")).transpose()? == Some(1) {
        set_attr(g, id, "axes", Attribute::Ints(vec![0, 1, 2, 3]))?;
        return Ok(Some("`across_channels` = 1 → `axes` [0, 1, 2, 3]".into()));
    }
    Ok(Some("dropped `across_channels`/`normalize_variance` (defaults)".into()))
}

/// Slice before 10: `starts`/`ends`/`axes` attributes → inputs.
pub(super) fn slice_attrs(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let mut what = Vec::new();
    for (slot, name) in [(1, "starts"), (2, "ends"), (3, "axes")] {
        if let Some(w) = attr_to_input(g, env, id, name, slot)? {
            what.push(w);
        }
    }
    Ok((!what.is_empty()).then(|| what.join(", ")))
}

/// TopK before 10: `k` → a one-element int64 input.
pub(super) fn topk_k(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let Some(k) = take_attr(g, id, "k")? else { return Ok(None) };
    let k = k.as_int("k")?;
    let v = add_const(g, env, id, "k", ints(&[k])?)?;
    set_input(g, id, 1, Some(v))?;
    Ok(Some(format!("`k` {k} → input")))
}

/// Clip before 11: `min`/`max` → scalar inputs of the input's type (absent bounds stay
/// omitted: no bound, as the old defaults ±FLT_MAX).
pub(super) fn clip_attrs(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let min = take_float(g, id, "min")?;
    let max = take_float(g, id, "max")?;
    if min.is_none() && max.is_none() {
        return Ok(None);
    }
    let dtype = float_type(env, input(g.operation(id)?, 0));
    for (slot, name, bound) in [(1, "min", min), (2, "max", max)] {
        if let Some(b) = bound {
            let v = add_const(g, env, id, name, scalar(dtype, b)?)?;
            set_input(g, id, slot, Some(v))?;
        }
    }
    let show = |b: Option<f32>| b.map_or("none".to_string(), |b| b.to_string());
    Ok(Some(format!("`min` {} / `max` {} → {} inputs", show(min), show(max), dtype.onnx_name())))
}

/// Pad before 11: `pads` → int64 input, `value` → scalar input of the data's type.
pub(super) fn pad_attrs(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let pads = take_ints(g, id, "pads")?;
    let value = take_float(g, id, "value")?;
    if pads.is_none() && value.is_none() {
        return Ok(None);
    }
    let mut what = Vec::new();
    if let Some(p) = pads {
        let v = add_const(g, env, id, "pads", ints(&p)?)?;
        set_input(g, id, 1, Some(v))?;
        what.push(format!("`pads` {p:?} → input"));
    }
    let constant = g.operation(id)?.attr_string("mode", "constant")? == "constant";
    if let Some(value) = value.filter(|_| constant) {
        let dtype = float_type(env, input(g.operation(id)?, 0));
        let v = add_const(g, env, id, "constant_value", scalar(dtype, value)?)?;
        set_input(g, id, 2, Some(v))?;
        what.push(format!("`value` {value} → input"));
    }
    Ok(Some(what.join(", ")))
}

// ---- opset 13 -------------------------------------------------------------------------------

/// Squeeze, Unsqueeze, ReduceSum (13) and the other Reduce* (18): `axes` → int64 input. No
/// `axes` stays no input (all axes, as before: `noop_with_empty_axes` defaults to 0); an empty
/// list means the same.
pub(super) fn axes_to_input(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    if let Some(Attribute::Ints(a)) = g.operation(id)?.attr("axes")
        && a.is_empty()
    {
        take_attr(g, id, "axes")?;
        return Ok(Some("empty `axes` dropped (all axes)".into()));
    }
    attr_to_input(g, env, id, "axes", 1)
}

/// Split before 13: `split` → int64 input.
pub(super) fn split_attr_to_input(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    attr_to_input(g, env, id, "split", 1)
}

/// Split from 18: equal parts need `num_outputs`.
pub(super) fn split_num_outputs(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    if input(op, 1).is_some() || op.attr("num_outputs").is_some() {
        return Ok(None);
    }
    let n = op.outputs().len() as i64;
    set_attr(g, id, "num_outputs", Attribute::Int(n))?;
    Ok(Some(format!("`num_outputs` = {n} (equal parts)")))
}

/// Softmax, LogSoftmax, Hardmax before 13 flatten the input to 2-D at `axis` (default 1) and
/// normalise each row; from 13 they work along `axis` alone. The same when `axis` is the last
/// axis; otherwise Shape → Flatten(axis) → op(axis = -1) → Reshape(shape).
pub(super) fn softmax_axis(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let axis = op.attr_int("axis", 1)?;
    if axis == -1 {
        return Ok(None);
    }
    let x = input(op, 0).ok_or_else(|| err(g, op, "has no input"))?;
    if let Some(rank) = env.hints.rank(x) {
        let last = axis == rank as i64 - 1 || axis == -1;
        if last {
            set_attr(g, id, "axis", Attribute::Int(-1))?;
            return Ok(Some(format!("`axis` {axis} is the last axis of the rank-{rank} input: axis = -1")));
        }
    }
    let name = label(g, op);
    let shape = new_var(g, env, &format!("{}_shape", g.var_name(x)))?;
    g.add_operation(new_op(g, env, "Shape", &format!("{name}_shape")), &[Some(x)], &[Some(shape)])?;
    let flatten = new_op(g, env, "Flatten", &format!("{name}_flatten")).with_attr("axis", Attribute::Int(axis));
    chain_before(g, env, id, 0, flatten, &[])?;
    let reshape = new_op(g, env, "Reshape", &format!("{name}_reshape"));
    chain_after(g, env, id, reshape, &[Some(shape)])?;
    set_attr(g, id, "axis", Attribute::Int(-1))?;
    Ok(Some(format!(
        "coerced to 2-D at `axis` {axis}: Shape → Flatten → {}(axis = -1) → Reshape",
        g.operation(id)?.op_type
    )))
}

pub(super) fn check_resize_tf_half_pixel(_: &Graph, _: &Env, op: &Operation) -> Option<String> {
    if op.attr_string("coordinate_transformation_mode", "half_pixel").ok()? != "tf_half_pixel_for_nn" {
        return None;
    }
    let mode = op.attr_string("mode", "nearest").ok()?;
    let rounding = op.attr_string("nearest_mode", "round_prefer_floor").ok()?;
    match (mode.as_str(), rounding.as_str()) {
        ("nearest", "floor" | "round_prefer_floor") => None,
        ("nearest", r) => Some(format!(
            "tf_half_pixel_for_nn (removed at opset 13) with nearest_mode {r} has no equivalent \
             (floor and round_prefer_floor have): re-export with half_pixel"
        )),
        (m, _) => Some(format!("tf_half_pixel_for_nn (removed at opset 13) with mode {m}: re-export with half_pixel")),
    }
}

/// Resize-11's `tf_half_pixel_for_nn` (removed at 13) samples at `(x + 0.5) / scale`, half a
/// pixel right of `half_pixel`; `floor` of it is `round_prefer_ceil` of the half_pixel
/// coordinate, `round_prefer_floor` of it is `ceil`.
pub(super) fn resize_tf_half_pixel(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    if op.attr_string("coordinate_transformation_mode", "half_pixel")? != "tf_half_pixel_for_nn" {
        return Ok(None);
    }
    let old = op.attr_string("nearest_mode", "round_prefer_floor")?;
    let new = match old.as_str() {
        "floor" => "round_prefer_ceil",
        "round_prefer_floor" => "ceil",
        other => return Err(err(g, op, format!("tf_half_pixel_for_nn with nearest_mode {other} cannot be converted"))),
    };
    set_attr(g, id, "coordinate_transformation_mode", string_attr("half_pixel"))?;
    set_attr(g, id, "nearest_mode", string_attr(new))?;
    Ok(Some(format!("tf_half_pixel_for_nn + {old} → half_pixel + {new}")))
}

// ---- opsets 14 to 21 ------------------------------------------------------------------------

/// RoiAlign-16's default coordinate transformation (`half_pixel`) is not RoiAlign-10's.
pub(super) fn roialign_mode(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    if g.operation(id)?.attr("coordinate_transformation_mode").is_some() {
        return Ok(None);
    }
    set_attr(g, id, "coordinate_transformation_mode", string_attr("output_half_pixel"))?;
    Ok(Some("coordinate_transformation_mode = output_half_pixel (opset 10 behaviour)".into()))
}

/// GridSample-20 renamed its modes.
pub(super) fn gridsample_mode(g: &mut Graph, _: &Env, id: OpId) -> Result<Option<String>> {
    let mode = g.operation(id)?.attr_string("mode", "bilinear")?;
    let new = match mode.as_str() {
        "bilinear" => "linear",
        "bicubic" => "cubic",
        _ => return Ok(None),
    };
    if g.operation(id)?.attr("mode").is_none() {
        return Ok(None);
    }
    set_attr(g, id, "mode", string_attr(new))?;
    Ok(Some(format!("mode {mode} → {new}")))
}

/// DFT-20: `axis` attribute (default 1) → input (default -2), always written.
pub(super) fn dft_axis(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let axis = take_attr(g, id, "axis")?.map(|a| a.as_int("axis")).transpose()?.unwrap_or(1);
    let v = add_const(g, env, id, "axis", TensorData::scalar(axis))?;
    set_input(g, id, 2, Some(v))?;
    Ok(Some(format!("`axis` {axis} → input")))
}

/// The channel count of `x` when its declared type gives it.
fn channels(g: &Graph, x: VarId) -> Option<usize> {
    let shape = g.variable(x).ok()?.ty.as_ref()?.as_tensor()?.shape.as_ref()?;
    match shape.get(1)? {
        Dim::Known(c) if *c > 0 => Some(*c as usize),
        _ => None,
    }
}

/// GroupNormalization-21 takes scale and bias per channel, -18 per group: each group value is
/// repeated C / G times (constants folded when C is declared, else Reshape → Expand → Reshape
/// on `C / G` computed from the input's shape).
pub(super) fn groupnorm_per_channel(g: &mut Graph, env: &Env, id: OpId) -> Result<Option<String>> {
    let op = g.operation(id)?;
    let groups = op.required_attr("num_groups")?.as_int("num_groups")?;
    let x = input(op, 0).ok_or_else(|| err(g, op, "has no input"))?;
    let (Some(scale), Some(bias)) = (input(op, 1), input(op, 2)) else {
        return Err(err(g, op, "needs scale and bias inputs"));
    };
    let name = label(g, op);
    let c = channels(g, x);
    let (sv, bv) = (const_value(g, scale), const_value(g, bias));
    if let (Some(c), Some(sv), Some(bv)) = (c, &sv, &bv)
        && groups > 0
        && c % groups as usize == 0
    {
        let per = c / groups as usize;
        for (slot, what, t) in [(1, "scale", sv), (2, "bias", bv)] {
            let values: Vec<f32> = t.to_f32_vec()?.iter().flat_map(|v| std::iter::repeat_n(*v, per)).collect();
            let v = add_const(g, env, id, what, TensorData::from_f32_as(t.dtype(), vec![c], &values)?)?;
            g.set_op_input(id, slot, Some(v))?;
        }
        return Ok(Some(format!("scale/bias per group → per channel ({groups} groups of {per})")));
    }
    // C / G at run time: Shape(x)[1:2] / G, as [1, C/G] to expand the [G, 1] values.
    let c_var = new_var(g, env, &format!("{name}_channels"))?;
    let shape = new_op(g, env, "Shape", &format!("{name}_channels"))
        .with_attr("start", Attribute::Int(1))
        .with_attr("end", Attribute::Int(2));
    g.add_operation(shape, &[Some(x)], &[Some(c_var)])?;
    let g_var = add_const(g, env, id, "num_groups", ints(&[groups])?)?;
    let per = new_var(g, env, &format!("{name}_per_group"))?;
    g.add_operation(new_op(g, env, "Div", &format!("{name}_per_group")), &[Some(c_var), Some(g_var)], &[Some(per)])?;
    let one = add_const(g, env, id, "one", ints(&[1])?)?;
    let expand_shape = new_var(g, env, &format!("{name}_expand_shape"))?;
    let concat = new_op(g, env, "Concat", &format!("{name}_expand_shape")).with_attr("axis", Attribute::Int(0));
    g.add_operation(concat, &[Some(one), Some(per)], &[Some(expand_shape)])?;
    let column = add_const(g, env, id, "column", ints(&[-1, 1])?)?;
    let flat = add_const(g, env, id, "flat", ints(&[-1])?)?;
    for (slot, what, v) in [(1, "scale", scale), (2, "bias", bias)] {
        let col = new_var(g, env, &format!("{name}_{what}_column"))?;
        g.add_operation(
            new_op(g, env, "Reshape", &format!("{name}_{what}_column")),
            &[Some(v), Some(column)],
            &[Some(col)],
        )?;
        let wide = new_var(g, env, &format!("{name}_{what}_expanded"))?;
        g.add_operation(
            new_op(g, env, "Expand", &format!("{name}_{what}_expand")),
            &[Some(col), Some(expand_shape)],
            &[Some(wide)],
        )?;
        let per_channel = new_var(g, env, &format!("{name}_{what}_per_channel"))?;
        g.add_operation(
            new_op(g, env, "Reshape", &format!("{name}_{what}_flat")),
            &[Some(wide), Some(flat)],
            &[Some(per_channel)],
        )?;
        g.set_op_input(id, slot, Some(per_channel))?;
    }
    Ok(Some(format!("scale/bias per group → per channel ({groups} groups; Reshape → Expand → Reshape)")))
}
