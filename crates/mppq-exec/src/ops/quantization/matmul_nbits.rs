//! `com.microsoft::MatMulNBits` (ONNX Runtime's weight-only MatMul): `Y = A · dq(B)ᵀ + bias`
//! with `B` block-quantized to 2, 4 or 8 bits. `B` is `[N, k_blocks, block_size · bits / 8]`
//! bytes, codes low bits first; `scales` `[N, k_blocks]`; `zero_points` packed the same way
//! per channel (`[N, ceil(k_blocks · bits / 8)]` bytes) or in the scales' float type, absent
//! meaning `2^(bits−1)`; `dq = (code − zero_point) · scale`. The product is computed in float32
//! as ONNX Runtime's CPU kernel does at `accuracy_level` 0 (the dequantized weight, then a
//! float GEMM); `accuracy_level` 4 (int8 activations there) is not modelled. `g_idx`
//! (act-order) is refused unless it is the identity order.

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::math::matmul::matmul;
use crate::registry::OpRegistry;
use crate::tensor::{Kind, Tensor, broadcast_pair};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use mppq_ir::DataType;
use std::sync::Arc;

pub fn register(r: &mut OpRegistry) {
    r.register("com.microsoft", "MatMulNBits", 1, Arc::new(build));
}

struct MatMulNBits {
    k: usize,
    n: usize,
    bits: usize,
    block_size: usize,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let (k, n) = (node.int("K", 0)?, node.int("N", 0)?);
    let (bits, block_size) = (node.int("bits", 4)?, node.int("block_size", 0)?);
    if k <= 0 || n <= 0 {
        return Err(node.err(format!("K = {k} and N = {n} must be positive")));
    }
    if !matches!(bits, 2 | 4 | 8) {
        return Err(node.err(format!("bits = {bits}: use 2, 4 or 8")));
    }
    if block_size < 16 || (block_size as u64).count_ones() != 1 {
        return Err(node.err(format!("block_size = {block_size}: use a power of two of at least 16")));
    }
    Ok(Box::new(MatMulNBits { k: k as usize, n: n as usize, bits: bits as usize, block_size: block_size as usize }))
}

impl MatMulNBits {
    fn k_blocks(&self) -> usize {
        self.k.div_ceil(self.block_size)
    }

    /// The dequantized weight as `[K, N]` float32.
    fn weight(
        &self,
        ctx: &KernelContext<'_>,
        b: &Tensor,
        scales: &Tensor,
        zero_points: Option<&Tensor>,
    ) -> Result<Vec<f32>> {
        let (kb, blob) = (self.k_blocks(), self.block_size * self.bits / 8);
        if b.dtype() != DataType::Uint8 || b.numel() != self.n * kb * blob {
            return Err(ctx.err(format!(
                "B is {} {:?}; uint8 [{}, {kb}, {blob}] expected for N = {}, K = {}, bits = {}, block_size = {}",
                b.dtype(),
                b.shape(),
                self.n,
                self.n,
                self.k,
                self.bits,
                self.block_size
            )));
        }
        if scales.kind() != Kind::Float || scales.numel() != self.n * kb {
            return Err(ctx.err(format!(
                "scales {:?}: {} float values expected ([N, k_blocks])",
                scales.shape(),
                self.n * kb
            )));
        }
        let codes = b.to_i64_vec();
        let scales = scales.to_f32_vec();
        let mask = (1i64 << self.bits) - 1;
        let code = |n: usize, k: usize| {
            let (blk, j) = (k / self.block_size, k % self.block_size);
            let bit = j * self.bits;
            (codes[(n * kb + blk) * blob + bit / 8] >> (bit % 8)) & mask
        };
        let zp_row = (kb * self.bits).div_ceil(8);
        let zero_point: Box<dyn Fn(usize, usize) -> f32> = match zero_points {
            None => {
                let mid = (1i64 << (self.bits - 1)) as f32;
                Box::new(move |_, _| mid)
            }
            Some(z) if z.dtype() == DataType::Uint8 && z.numel() == self.n * zp_row => {
                let z = z.to_i64_vec();
                let bits = self.bits;
                Box::new(move |n, blk| ((z[n * zp_row + blk * bits / 8] >> (blk * bits % 8)) & mask) as f32)
            }
            Some(z) if z.kind() == Kind::Float && z.numel() == self.n * kb => {
                let z = z.to_f32_vec();
                Box::new(move |n, blk| z[n * kb + blk])
            }
            Some(z) => {
                return Err(ctx.err(format!(
                    "zero_points {} {:?}: uint8 [{}, {zp_row}] (packed) or float [{}, {kb}] expected",
                    z.dtype(),
                    z.shape(),
                    self.n,
                    self.n
                )));
            }
        };
        let mut w = vec![0f32; self.k * self.n];
        for n in 0..self.n {
            for k in 0..self.k {
                let blk = k / self.block_size;
                w[k * self.n + n] = (code(n, k) as f32 - zero_point(n, blk)) * scales[n * kb + blk];
            }
        }
        Ok(w)
    }
}

impl Kernel for MatMulNBits {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let (a, b, scales) = (ins.tensor(0)?, ins.tensor(1)?, ins.tensor(2)?);
        let zero_points = ins.opt_tensor(3)?;
        if let Some(g_idx) = ins.opt_tensor(4)? {
            let identity = g_idx.to_i64_vec().iter().enumerate().all(|(k, g)| *g == (k / self.block_size) as i64);
            if !identity {
                return Err(ctx.not_implemented("g_idx with an order other than k / block_size (act-order)"));
            }
        }
        let bias = ins.opt_tensor(5)?;
        if a.kind() != Kind::Float || a.shape().last() != Some(&self.k) {
            return Err(ctx.err(format!("A is {} {:?}; float [..., K = {}] expected", a.dtype(), a.shape(), self.k)));
        }
        let dtype = a.dtype();
        let w = self.weight(ctx, &b, &scales, zero_points.as_ref())?;
        let w = a.like_f32(&[self.k, self.n], w);
        let mut y = matmul(ctx, a.cast(DataType::Float)?, w)?;
        if let Some(bias) = bias {
            if bias.numel() != self.n {
                return Err(ctx.err(format!("bias {:?}: [N = {}] expected", bias.shape(), self.n)));
            }
            let bias = bias.cast(DataType::Float)?.reshape(&[self.n]);
            let (y_full, bias, _) =
                broadcast_pair(y, bias).map_err(|(l, r)| ctx.err(format!("bias {r:?} does not broadcast to {l:?}")))?;
            y = Tensor::from_dispatch(Dispatch::float_add(y_full.into_dispatch(), bias.into_dispatch()));
        }
        Ok(vec![Some(y.cast(dtype)?.into())])
    }
}
