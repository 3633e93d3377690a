//! The hand-written CPU kernels, for the few operators where Burn's CPU backend (`flex`) was the
//! bottleneck: float32 convolution as an implicit GEMM (`conv`) on our packed matrix product
//! (`sgemm`) or, depthwise, direct (`depthwise`), and 2-d max pooling (`max_pool`). The operators ([`crate::ops`]) keep their
//! attributes and checks and call these when the input is a contiguous CPU float32 tensor.
//! The integer-exact simulation's convolutions run on an int8 matrix product (`igemm`,
//! `integer_conv`).
//!
//! Loops that want wider vectors than the baseline build are compiled per instruction set and
//! chosen at run time with [`crate::simd_dispatch!`] (`simd`).
//!
//! This module also gives zero-copy access to the float32 buffers of `flex`: reading a Burn
//! tensor through `TensorData` copies it, which on ResNet-18 cost as much as the arithmetic; and
//! says what this CPU's integer dot products can do ([`has_vnni`]).

pub(crate) mod conv;
pub(crate) mod depthwise;
pub mod elementwise;
pub(crate) mod gather;
pub mod igemm;
pub(crate) mod integer_conv;
pub(crate) mod max_pool;
pub mod sgemm;
pub mod simd;

use crate::tensor::Tensor;
use burn::backend::{BackendTensor, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind};
use burn::tensor::DType;

/// Matches the flex float32 tensor inside a [`Tensor`] (not recorded for autodiff).
macro_rules! flex_f32 {
    ($t:expr) => {
        match $t.dispatch() {
            DispatchTensor {
                kind: DispatchTensorKind::Flex(BackendTensor::Float(ft)),
                autodiff: DispatchAutodiffContext::Disabled,
            } if ft.dtype() == DType::F32 => Some(ft),
            _ => None,
        }
    };
}

/// The values of a contiguous CPU float32 tensor, row-major, without copying; `None` for any
/// other tensor (other device, dtype, strided view, autodiff).
pub fn f32_values(t: &Tensor) -> Option<&[f32]> {
    flex_f32!(t)?.as_slice::<f32>()
}

/// The values of a float tensor as float32, row-major: borrowed when [`f32_values`] can,
/// copied (and converted) otherwise.
pub fn f32_values_or_copy(t: &Tensor) -> std::borrow::Cow<'_, [f32]> {
    match f32_values(t) {
        Some(values) => std::borrow::Cow::Borrowed(values),
        None => std::borrow::Cow::Owned(t.to_f32_vec()),
    }
}

/// Whether `a` and `b` are views of the same buffer at the same place and shape, i.e. hold the
/// same values (used to reuse what was derived from a weight, such as its packed form).
pub fn same_buffer(a: &Tensor, b: &Tensor) -> bool {
    match (flex_f32!(a), flex_f32!(b)) {
        (Some(x), Some(y)) => {
            std::sync::Arc::ptr_eq(&x.data_arc(), &y.data_arc())
                && x.layout().start_offset() == y.layout().start_offset()
                && x.layout().shape() == y.layout().shape()
        }
        _ => false,
    }
}

/// The output pointer the matrix products' tasks share, each writing a disjoint block of it.
pub(crate) struct SharedOut(pub(crate) *mut f32);
// SAFETY: tasks write disjoint parts of the buffer (see `sgemm::gemm`, `igemm::igemm`).
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// # Safety
    /// `offset` must lie inside the buffer.
    pub(crate) unsafe fn at(&self, offset: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(offset) }
    }
}

/// The register-tile kernel to use, of `all` (fastest first): the one `env_var` names when this
/// CPU runs it (for benchmarks), else the fastest this CPU runs, else `fallback`.
pub(crate) fn choose_kernel<K: Copy>(
    env_var: &str,
    all: &[K],
    name: impl Fn(K) -> &'static str,
    supported: impl Fn(K) -> bool,
    fallback: K,
) -> K {
    let wanted = std::env::var(env_var).ok();
    let named = wanted.and_then(|w| all.iter().copied().find(|&k| name(k) == w.trim()));
    named.filter(|&k| supported(k)).or_else(|| all.iter().copied().find(|&k| supported(k))).unwrap_or(fallback)
}

/// Whether this CPU multiplies u8×s8 pairs into 32 bits without saturating: x86-64 with VNNI
/// (AVX-512 VNNI or AVX-VNNI), and every non-x86 CPU. AVX2-only x86 integer kernels (ONNX
/// Runtime's MLAS) use `pmaddubsw`, which saturates the 16-bit sum of two 8-bit products, so
/// exact integer inference there needs 7-bit weights (ORT's `reduce_range`).
pub fn has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vnni") || std::arch::is_x86_feature_detected!("avxvnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}
