//! Block-wise weights ([`mppq_ir::quant::block`]) in the QDQ model, in one of two forms
//! ([`BlockedWeights`]):
//! - ONNX Runtime's `com.microsoft::MatMulNBits` in place of the MatMul (or Gemm): codes packed
//!   `[N, k_blocks, block_size · bits / 8]` low bits first, scales `[N, k_blocks]`, zero points
//!   packed per channel (absent when symmetric: ORT's default `2^(bits−1)`; float `[N, k_blocks]`
//!   when they are refined floats, HQQ's), the Gemm's bias as its `bias` input. Needs no opset
//!   change;
//! - an integer initializer with opset 21's blocked `DequantizeLinear` (`axis` = the block axis,
//!   `block_size`) feeding the unchanged operation: standard ONNX, opset 21 (integer zero points
//!   only).
//!
//! An operation `MatMulNBits` cannot express (a Gemm with `alpha` ≠ 1, `beta` other than 0 or 1,
//! `transA`, or a bias that is not `[N]`) is written in the second form. The codes are the simulation's
//! ([`mppq_ir::quant::block_code`]), so both forms compute what was simulated.

use crate::error::{ExportError, Result};
use mppq_ir::quant::{BlockGrid, TensorQuantConfig, block_code};
use mppq_ir::{Attribute, DataType, Graph, OpId, Operation, TensorData, VarId};

/// How block-wise weights are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedWeights {
    /// `com.microsoft::MatMulNBits` (what ONNX Runtime runs fastest; its default).
    #[default]
    MatmulNbits,
    /// Opset 21's blocked `DequantizeLinear` + the original operation (standard ONNX).
    DequantizeLinear,
}

/// The codes of a block-wise weight in its own (row-major) layout, and its grid.
pub fn blocked_codes(
    data: &[f32],
    shape: &[usize],
    c: &TensorQuantConfig,
) -> std::result::Result<(BlockGrid, Vec<i64>), String> {
    let grid = c.block_grid(shape).map_err(|e| e.to_string())?.ok_or("the config is not block-wise")?;
    if c.scale.len() != grid.params() || c.offset.len() != grid.params() {
        return Err(format!("{} block parameters for {} blocks (shape {shape:?})", c.scale.len(), grid.params()));
    }
    let mut codes = vec![0i64; data.len()];
    for ch in 0..grid.channels {
        for k in 0..grid.run {
            let (i, p) = (grid.index(ch, k), grid.param(ch, k));
            let q = block_code(data[i], c.scale[p], c.offset[p], c.quant_min, c.quant_max);
            if q == i32::MIN {
                return Err(format!("weight element {i} is NaN"));
            }
            codes[i] = i64::from(q);
        }
    }
    Ok((grid, codes))
}

/// Scale and zero point of a blocked `DequantizeLinear`: the weight's shape with the block axis
/// cut to the block count.
pub fn blocked_params_shape(
    shape: &[usize],
    c: &TensorQuantConfig,
    grid: &BlockGrid,
) -> (Vec<usize>, Vec<f32>, Vec<i64>) {
    let axis = c.block.map_or(0, |b| b.axis);
    let mut pshape = shape.to_vec();
    pshape[axis] = grid.blocks;
    // Row-major over `pshape`: [blocks, channels] when the blocks run along axis 0.
    let (mut scale, mut zp) = (Vec::with_capacity(grid.params()), Vec::with_capacity(grid.params()));
    for r in 0..pshape[0] {
        for col in 0..pshape[1] {
            let p = if axis == 0 { col * grid.blocks + r } else { r * grid.blocks + col };
            scale.push(c.scale[p]);
            zp.push(c.offset[p] as i64);
        }
    }
    (pshape, scale, zp)
}

/// What a MatMul or Gemm becomes in `MatMulNBits`: (data input, bias input).
fn nbits_operands(g: &Graph, id: OpId, weight_slot: usize, c: &TensorQuantConfig) -> Option<(VarId, Option<VarId>)> {
    let op = g.operation(id).ok()?;
    let block = c.block?;
    if weight_slot != 1 || !block.size.is_power_of_two() || block.size < 16 || !matches!(c.num_of_bits, 2 | 4 | 8) {
        return None;
    }
    let a = op.inputs().first().copied().flatten()?;
    match op.op_type.as_str() {
        // MatMul's weight is [K, N]: blocks along axis 0.
        "MatMul" if op.domain.is_empty() && block.axis == 0 => Some((a, None)),
        "Gemm" if op.domain.is_empty() => {
            let plain = op.attr_int("transA", 0).ok()? == 0 && op.attr_float("alpha", 1.0).ok()? == 1.0;
            let trans_b = op.attr_int("transB", 0).ok()? != 0;
            // The weight is [N, K] with transB, else [K, N]: the blocks run along K either way.
            if !plain || block.axis != usize::from(trans_b) {
                return None;
            }
            // `beta` scales C: 0 drops it (exporters write `beta = 0` without C), 1 is the bias.
            let bias = match op.attr_float("beta", 1.0).ok()? {
                0.0 => None,
                1.0 => op.inputs().get(2).copied().flatten(),
                _ => return None,
            };
            let n = g.variable(op.inputs()[1]?).ok()?.value.as_ref()?.shape()[1 - block.axis];
            let bias_ok = bias
                .is_none_or(|b| g.variable(b).ok().and_then(|v| v.value.as_ref()).is_some_and(|t| t.shape() == [n]));
            bias_ok.then_some((a, bias))
        }
        _ => None,
    }
}

/// Replaces every MatMul/Gemm of `g` whose weight has an exported block-wise config by
/// `MatMulNBits` (sub-graphs are the caller's); the operation's other configs (a quantized
/// input or output of a model that is also W8A8) move to the new operation. Returns how many.
pub fn to_matmul_nbits(g: &mut Graph, accuracy_level: Option<i64>) -> Result<usize> {
    let mut done = 0;
    let candidates: Vec<(OpId, usize, TensorQuantConfig)> = g
        .operations()
        .filter_map(|(id, op)| {
            let qc = op.quant_config.as_ref()?;
            let (slot, c) = qc.input_configs.iter().enumerate().find_map(|(s, c)| {
                c.as_ref().filter(|c| c.block.is_some() && c.state.is_active()).map(|c| (s, c.clone()))
            })?;
            Some((id, slot, c))
        })
        .collect();
    for (id, slot, c) in candidates {
        let Some((a, bias)) = nbits_operands(g, id, slot, &c) else { continue };
        let Some(Some(w)) = g.operation(id)?.inputs().get(slot).copied() else { continue };
        let wv = g.variable(w)?;
        let base = wv.name.clone();
        let value =
            wv.value.clone().ok_or_else(|| unsupported(g, id, w, "block-wise weight without a value".into()))?;
        let data = value.to_f32_vec().map_err(|e| unsupported(g, id, w, e.to_string()))?;
        let (grid, codes) = blocked_codes(&data, value.shape(), &c).map_err(|m| unsupported(g, id, w, m))?;
        let bits = c.num_of_bits as usize;
        // Unsigned codes (symmetric ones shifted by 2^(b−1)) per channel, each run padded to whole
        // blocks, packed low bits first: MatMulNBits' [N, k_blocks, block_size · bits / 8].
        let mut stored = vec![0i64; grid.channels * grid.blocks * grid.size];
        for ch in 0..grid.channels {
            for k in 0..grid.run {
                stored[ch * grid.blocks * grid.size + k] = codes[grid.index(ch, k)] - c.quant_min;
            }
        }
        let blob = grid.size * bits / 8;
        let packed = mppq_ir::lowp::pack_sub_byte(bits as u32, &stored);
        let packed = TensorData::from_packed(DataType::Uint8, vec![grid.channels, grid.blocks, blob], packed)?;
        // Scales (and float zero points) in the model's float type: MatMulNBits binds them to A's.
        let float_type = if value.dtype().is_float() { value.dtype() } else { DataType::Float };
        let scales = TensorData::from_f32_as(float_type, vec![grid.channels, grid.blocks], &c.scale)?;
        let float_zero_points = c.offset.iter().any(|o| o.fract() != 0.0);
        let zero_points = if c.policy.is_symmetric() {
            None
        } else if float_zero_points {
            // Refined zero points (HQQ): MatMulNBits takes them in the scales' type.
            Some(TensorData::from_f32_as(float_type, vec![grid.channels, grid.blocks], &c.offset)?)
        } else {
            // Packed per channel: each channel's row starts on a byte.
            let zp: Vec<u8> = c
                .offset
                .chunks(grid.blocks)
                .flat_map(|row| {
                    mppq_ir::lowp::pack_sub_byte(bits as u32, &row.iter().map(|o| *o as i64).collect::<Vec<_>>())
                })
                .collect();
            let len = zp.len();
            Some(TensorData::from_packed(DataType::Uint8, vec![len], zp)?)
        };
        let b = g.add_initializer(g.fresh_var_name(&format!("{base}_Q{bits}")), packed)?;
        let s = g.add_initializer(g.fresh_var_name(&format!("{base}_scales")), scales)?;
        let z = match zero_points {
            Some(zp) => Some(g.add_initializer(g.fresh_var_name(&format!("{base}_zero_points")), zp)?),
            None => None,
        };
        let old = g.remove_operation(id)?;
        let mut op = Operation::new("MatMulNBits", g.fresh_op_name(&format!("{}_Q{bits}", old.name)))
            .with_domain("com.microsoft", 1)
            .with_attr("K", Attribute::Int(grid.run as i64))
            .with_attr("N", Attribute::Int(grid.channels as i64))
            .with_attr("bits", Attribute::Int(bits as i64))
            .with_attr("block_size", Attribute::Int(grid.size as i64));
        if let Some(level) = accuracy_level.filter(|l| *l != 0) {
            op = op.with_attr("accuracy_level", Attribute::Int(level));
        }
        // A W8A8 model's quantized data input and output stay where they were.
        op.precision = old.precision;
        op.quant_config = old.quant_config.clone().map(|mut qc| {
            let data = qc.input_configs.first().cloned().flatten();
            qc.input_configs = vec![data, None, None, None, None, None];
            qc
        });
        let inputs = [Some(a), Some(b), Some(s), z, None, bias];
        let last = inputs.iter().rposition(Option::is_some).unwrap_or(0);
        if let Some(qc) = op.quant_config.as_mut() {
            qc.input_configs.truncate(last + 1);
        }
        g.add_operation(op, &inputs[..=last], old.outputs())?;
        if g.variable(w)?.consumers().is_empty() && !g.is_graph_input(w) && !g.is_graph_output(w) {
            g.remove_variable(w)?;
        }
        done += 1;
    }
    Ok(done)
}

fn unsupported(g: &Graph, op: OpId, var: VarId, message: String) -> ExportError {
    super::graph::unsupported(g, op, var, message)
}
