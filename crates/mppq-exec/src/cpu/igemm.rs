//! Integer matrix product `C = A·B + bias` for the integer-exact simulation of 8-bit
//! convolutions: A holds the weights' integer codes (`m × k`, each in −128..=127) and is packed
//! once; B holds the activation codes shifted into 0..=255 (`k × n`) and is packed block by
//! block from its source ([`CodeRows`]). Products and sums are exact in int32, as an int8
//! runtime computes them, and C is written as float32: the int32 accumulator converted, which
//! is what ONNX Runtime multiplies by the requantization scale.
//!
//! Layout: K in groups of four (the unit of VNNI's `vpdpbusd`: four u8×s8 products added into
//! one int32 lane). A in panels of [`MR`] rows, one 32-bit word per row and group (two on AVX2,
//! below); B in panels of [`NR`] columns, `[panel][k/4][NR][4]` bytes; both zero-padded.
//!
//! Kernels, chosen at run time ([`IgemmKernel::detect`], `MPPQ_IGEMM_KERNEL` for benchmarks):
//! AVX-512 VNNI (6×32 tile), AVX-VNNI (6×16), AVX2 and a portable one. The AVX2 kernel
//! multiplies 16-bit halves with `vpmaddwd` (exact) rather than `vpmaddubsw`, whose 16-bit sum
//! of two products saturates: this module computes the exact product on every CPU, so the
//! simulation gives the same numbers everywhere.

use super::SharedOut;
use rayon::prelude::*;

/// Rows of the register tile (A panel height).
pub const MR: usize = 6;
/// Columns of one B panel.
pub const NR: usize = 16;
/// Bytes of packed B per task block: the block stays in L2 while every row panel of A walks it.
const B_BLOCK_BYTES: usize = 192 * 1024;
/// Below this many multiply-adds a product runs on the calling thread.
const THREADED_MACS: usize = 1 << 21;

/// Where the rows of B come from: fills every row's columns `n0..n0+nc` into `out` (row `r` at
/// `out[r·stride..][..nc]`), as bytes (the shifted codes).
pub trait CodeRows: Sync {
    fn rows(&self, n0: usize, nc: usize, out: &mut [u8], stride: usize);
}

/// Packs columns `n0..n0+nc` of B (`k` rows) into `out` (`[ceil(nc/NR)][k4][NR][4]` bytes): all
/// rows into a scratch (as large as the packed block, so still in L2), then interleaved group by
/// group. Bytes of the rows past `k` and the columns past `nc` are left as they were: A is zero
/// there, and those columns of C are not written.
fn pack_b(b: &impl CodeRows, k: usize, n0: usize, nc: usize, out: &mut [u8], scratch: &mut Vec<u8>) {
    let (k4, stride) = (k.div_ceil(4), nc.div_ceil(NR) * NR);
    scratch.resize(4 * k4 * stride, 0);
    b.rows(n0, nc, scratch, stride);
    for g in 0..k4 {
        for p in 0..stride / NR {
            let row = |j: usize| &scratch[(4 * g + j) * stride + p * NR..][..NR];
            interleave4([row(0), row(1), row(2), row(3)], &mut out[(p * k4 + g) * NR * 4..][..NR * 4]);
        }
    }
}

/// `dst[4c + j] = row_j[c]`: four rows of a panel into the kernel's groups of four.
#[inline]
fn interleave4(rows: [&[u8]; 4], dst: &mut [u8]) {
    assert!(rows.iter().all(|r| r.len() >= NR) && dst.len() >= 4 * NR);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; every load and store is of 16 bytes inside its slice
        // (lengths asserted above).
        unsafe {
            let [a, b, c, d] = rows.map(|r| _mm_loadu_si128(r.as_ptr().cast()));
            let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
            let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
            let parts = [
                _mm_unpacklo_epi16(ab_lo, cd_lo),
                _mm_unpackhi_epi16(ab_lo, cd_lo),
                _mm_unpacklo_epi16(ab_hi, cd_hi),
                _mm_unpackhi_epi16(ab_hi, cd_hi),
            ];
            for (i, v) in parts.into_iter().enumerate() {
                _mm_storeu_si128(dst.as_mut_ptr().add(16 * i).cast(), v);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for c in 0..NR {
        dst[4 * c..4 * c + 4].copy_from_slice(&rows.map(|r| r[c]));
    }
}

/// Shifted codes as bytes: `dst[i] = src[i·step] + offset` for centred codes (integers, in
/// range). Adding 1.5·2²³ puts an integer below 2²² in the low bits of the float's mantissa, so
/// the conversion is an add and a truncation, which the compiler vectorizes.
pub fn to_bytes(src: &[f32], step: usize, offset: f32, dst: &mut [u8]) {
    if step == 1 {
        to_bytes_contiguous(&src[..dst.len()], offset + MANTISSA_SHIFT, dst);
    } else {
        for (d, v) in dst.iter_mut().zip(src.iter().step_by(step)) {
            *d = (v + (offset + MANTISSA_SHIFT)).to_bits() as u8;
        }
    }
}

const MANTISSA_SHIFT: f32 = 12_582_912.0;

#[inline(always)]
fn to_bytes_body(src: &[f32], shift: f32, dst: &mut [u8]) {
    for (d, v) in dst.iter_mut().zip(src) {
        *d = (v + shift).to_bits() as u8;
    }
}

crate::simd_dispatch!(
    /// [`to_bytes_body`] compiled for the widest instruction set this CPU has.
    fn to_bytes_contiguous(src: &[f32], shift: f32, dst: &mut [u8]) => to_bytes_body
);

/// A row-major `m × k` matrix of integer codes, packed for one kernel, with each row's sum (the
/// term the activations' offset multiplies).
pub struct PackedCodes {
    m: usize,
    k: usize,
    k4: usize,
    kernel: IgemmKernel,
    /// `[panel][k4][MR][words]` 32-bit words.
    data: Vec<i32>,
    row_sums: Vec<i32>,
}

impl PackedCodes {
    /// Packs `codes` (`m × k`, row-major) for this CPU's kernel; `None` when a value is not an
    /// integer in −128..=127 (the caller keeps its float path).
    pub fn pack(codes: &[f32], m: usize, k: usize) -> Option<Self> {
        Self::pack_for(IgemmKernel::detect(), codes, m, k)
    }

    /// [`Self::pack`] for a chosen kernel (benchmarks, tests); it must be one this CPU runs.
    pub fn pack_for(kernel: IgemmKernel, codes: &[f32], m: usize, k: usize) -> Option<Self> {
        if codes.len() != m * k || !codes.iter().all(|v| v.fract() == 0.0 && (-128.0..=127.0).contains(v)) {
            return None;
        }
        let (k4, words) = (k.div_ceil(4), kernel.a_words());
        let byte = |r: usize, kk: usize| if r < m && kk < k { codes[r * k + kk] as i8 } else { 0 };
        let mut data = vec![0i32; m.div_ceil(MR) * k4 * MR * words];
        data.par_chunks_mut(k4 * MR * words).enumerate().for_each(|(p, panel)| {
            for g in 0..k4 {
                for r in 0..MR {
                    let q = |j: usize| byte(p * MR + r, 4 * g + j);
                    let slot = &mut panel[(g * MR + r) * words..][..words];
                    if words == 1 {
                        slot[0] = i32::from_le_bytes([q(0), q(1), q(2), q(3)].map(|b| b as u8));
                    } else {
                        // AVX2: the even and odd bytes as pairs of 16-bit values (see `avx2`).
                        let pair =
                            |lo: i8, hi: i8| (lo as i16 as u16 as u32 | ((hi as i16 as u16 as u32) << 16)) as i32;
                        slot[0] = pair(q(0), q(2));
                        slot[1] = pair(q(1), q(3));
                    }
                }
            }
        });
        let row_sums = codes.chunks_exact(k.max(1)).take(m).map(|row| row.iter().map(|&v| v as i32).sum()).collect();
        Some(Self { m, k, k4, kernel, data, row_sums })
    }

    /// `Σ_k a[r][k]` per row.
    pub fn row_sums(&self) -> &[i32] {
        &self.row_sums
    }
}

/// `c` (row-major `m × n`) = `a · B + bias[row]`, B read from `b`, converted to float32.
pub fn igemm(a: &PackedCodes, b: &impl CodeRows, n: usize, bias: &[i32], c: &mut [f32]) {
    let (m, k4, kernel) = (a.m, a.k4, a.kernel);
    assert!(c.len() >= m * n && bias.len() >= m && kernel.is_supported());
    let tile_n = kernel.tile_panels() * NR;
    let col_units = n.div_ceil(tile_n);
    let threads = rayon::current_num_threads();
    let tasks = if m * n * k4 * 4 < THREADED_MACS { 1 } else { col_units.min(threads) };
    // Columns per packed block: a multiple of the tile width, the block within `B_BLOCK_BYTES`.
    let block_cols = (B_BLOCK_BYTES / (k4 * 4 * tile_n)).max(1) * tile_n;
    let out = SharedOut(c.as_mut_ptr());
    let task = |t: usize| {
        let cols = (t * col_units / tasks * tile_n).min(n)..((t + 1) * col_units / tasks * tile_n).min(n);
        let mut bbuf = vec![0u8; block_cols.min(cols.len()).div_ceil(NR) * k4 * NR * 4];
        let mut scratch = Vec::new();
        for n0 in cols.clone().step_by(block_cols) {
            let nc = block_cols.min(cols.end - n0);
            let panels = nc.div_ceil(NR);
            let bpack = &mut bbuf[..panels * k4 * NR * 4];
            pack_b(b, a.k, n0, nc, bpack, &mut scratch);
            for r in (0..m).step_by(MR) {
                let height = MR.min(m - r);
                let apanel = &a.data[r / MR * k4 * MR * kernel.a_words()..][..k4 * MR * kernel.a_words()];
                for p in (0..panels).step_by(kernel.tile_panels()) {
                    let width = (kernel.tile_panels() * NR).min(nc - p * NR);
                    let bpanel = |i: usize| bpack.get((p + i) * k4 * NR * 4..(p + i + 1) * k4 * NR * 4).unwrap_or(&[]);
                    let mut tile = [[0i32; 2 * NR]; MR];
                    // SAFETY: the kernel is supported (asserted); the panels hold k4 groups.
                    unsafe { kernel.tile(k4, apanel, [bpanel(0), bpanel(1)], &mut tile) };
                    for (i, acc) in tile.iter().enumerate().take(height) {
                        // SAFETY: tasks write disjoint column ranges of `c` (m × n, row stride n);
                        // row r+i < m, columns n0+p·NR.. < n.
                        let row = unsafe { std::slice::from_raw_parts_mut(out.at((r + i) * n + n0 + p * NR), width) };
                        row.iter_mut().zip(acc).for_each(|(o, v)| *o = (v + bias[r + i]) as f32);
                    }
                }
            }
        }
    };
    if tasks == 1 {
        task(0);
    } else {
        (0..tasks).into_par_iter().for_each(task);
    }
}

/// B given as a row-major `k × n` matrix of centred codes (as float32) and the offset that
/// brings them into 0..=255: 1×1 convolutions, tests.
pub struct DenseCodes<'a> {
    pub data: &'a [f32],
    pub k: usize,
    pub n: usize,
    pub offset: f32,
}

impl CodeRows for DenseCodes<'_> {
    fn rows(&self, n0: usize, nc: usize, out: &mut [u8], stride: usize) {
        for r in 0..self.k {
            let src = &self.data[r * self.n + n0..][..nc];
            to_bytes(src, 1, self.offset, &mut out[r * stride..][..nc]);
        }
    }
}

/// A register-tile kernel, one per instruction set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgemmKernel {
    /// 6×32 tile (12 16-lane accumulators, `vpdpbusd`), x86-64 with AVX-512 VNNI.
    Avx512Vnni,
    /// 6×16 tile (12 8-lane accumulators, `vpdpbusd` on 256 bits), x86-64 with AVX-VNNI.
    AvxVnni,
    /// 6×16 tile, `vpmaddwd` on the even and odd bytes widened to 16 bits, x86-64 with AVX2.
    Avx2,
    /// 6×16 tile in plain Rust.
    Portable,
}

impl IgemmKernel {
    /// Every kernel, fastest first.
    pub const ALL: [IgemmKernel; 4] =
        [IgemmKernel::Avx512Vnni, IgemmKernel::AvxVnni, IgemmKernel::Avx2, IgemmKernel::Portable];

    /// The kernel [`igemm`] uses: `MPPQ_IGEMM_KERNEL` when it names one this CPU runs, else the
    /// fastest this CPU runs. Decided once per process.
    pub fn detect() -> Self {
        static CHOSEN: std::sync::OnceLock<IgemmKernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            super::choose_kernel("MPPQ_IGEMM_KERNEL", &Self::ALL, Self::name, Self::is_supported, IgemmKernel::Portable)
        })
    }

    /// Whether this CPU runs the kernel.
    pub fn is_supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx512Vnni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::AvxVnni => {
                std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("avxvnni")
            }
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            IgemmKernel::Portable => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Whether the integer path beats the float one on this CPU (`cargo bench --bench sgemm`):
    /// the VNNI kernels always (2–2.5× the float kernels); the AVX2 kernel only where the float
    /// kernel is AVX2 too (1.1–1.35× it; AVX-512 float is faster); the portable one never.
    pub fn beats_float(self) -> bool {
        match self {
            IgemmKernel::Avx512Vnni | IgemmKernel::AvxVnni => true,
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx2 => !std::arch::is_x86_feature_detected!("avx512f"),
            _ => false,
        }
    }

    /// The kernel's name, as `MPPQ_IGEMM_KERNEL` and the bench write it.
    pub fn name(self) -> &'static str {
        match self {
            IgemmKernel::Avx512Vnni => "avx512vnni",
            IgemmKernel::AvxVnni => "avxvnni",
            IgemmKernel::Avx2 => "avx2",
            IgemmKernel::Portable => "portable",
        }
    }

    /// B panels per register tile.
    fn tile_panels(self) -> usize {
        if self == IgemmKernel::Avx512Vnni { 2 } else { 1 }
    }

    /// 32-bit words of A per row and group of four.
    fn a_words(self) -> usize {
        if self == IgemmKernel::Avx2 { 2 } else { 1 }
    }

    /// The product of one A panel (`k4 × MR × words`) and the B panels `b` (one, or two with a
    /// 32-wide tile; the second is empty when the tile does not reach it) into `tile`.
    ///
    /// # Safety
    /// The kernel must be supported; `a` holds `k4` groups of the panel, each B panel needed
    /// `k4 × NR × 4` bytes.
    unsafe fn tile(self, k4: usize, a: &[i32], b: [&[u8]; 2], tile: &mut [[i32; 2 * NR]; MR]) {
        assert!(a.len() >= k4 * MR * self.a_words() && b[0].len() >= k4 * NR * 4);
        // SAFETY (all arms): the kernel's instruction set is supported (the caller's contract);
        // the panels' sizes are asserted here and in the kernels.
        match self {
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx512Vnni if !b[1].is_empty() => unsafe { x86::vnni512::<2>(k4, a, b, tile) },
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx512Vnni => unsafe { x86::vnni512::<1>(k4, a, b, tile) },
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::AvxVnni => unsafe { x86::avx_vnni(k4, a, b[0], tile) },
            #[cfg(target_arch = "x86_64")]
            IgemmKernel::Avx2 => unsafe { x86::avx2(k4, a, b[0], tile) },
            _ => portable_tile(k4, a, b[0], tile),
        }
    }
}

/// The tile product in plain Rust, on the one-word layout.
fn portable_tile(k4: usize, a: &[i32], b: &[u8], tile: &mut [[i32; 2 * NR]; MR]) {
    for (aw, bg) in a.chunks_exact(MR).zip(b.chunks_exact(NR * 4)).take(k4) {
        for (row, w) in tile.iter_mut().zip(aw) {
            let q = w.to_le_bytes().map(|x| x as i8 as i32);
            for (o, col) in row.iter_mut().zip(bg.chunks_exact(4)) {
                *o += q[0] * col[0] as i32 + q[1] * col[1] as i32 + q[2] * col[2] as i32 + q[3] * col[3] as i32;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// `H` B panels (16 columns each, one 64-byte vector per group of four rows) × 6 rows:
    /// one broadcast word of A per row and group, `vpdpbusd` adds four u8×s8 products per lane.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn vnni512<const H: usize>(k4: usize, a: &[i32], b: [&[u8]; 2], tile: &mut [[i32; 2 * NR]; MR]) {
        assert!(a.len() >= k4 * MR && (0..H).all(|h| b[h].len() >= k4 * NR * 4));
        let mut acc = [[_mm512_setzero_si512(); H]; MR];
        for g in 0..k4 {
            // SAFETY: group g of each panel lies inside it (asserted above).
            unsafe {
                let mut bv = [_mm512_setzero_si512(); H];
                for (h, v) in bv.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(b[h].as_ptr().add(g * NR * 4).cast());
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_epi32(*a.get_unchecked(g * MR + r));
                    for (v, bh) in row.iter_mut().zip(bv) {
                        *v = _mm512_dpbusd_epi32(*v, bh, x);
                    }
                }
            }
        }
        for (row, v) in tile.iter_mut().zip(acc) {
            for (h, part) in v.into_iter().enumerate() {
                // SAFETY: each tile row holds 32 lanes; h < 2.
                unsafe { _mm512_storeu_si512(row.as_mut_ptr().add(16 * h).cast(), part) };
            }
        }
    }

    /// One B panel as two 32-byte vectors (8 columns each) × 6 rows, `vpdpbusd` on 256 bits.
    ///
    /// # Safety
    /// The CPU must support AVX2 and AVX-VNNI.
    #[target_feature(enable = "avx2,avxvnni")]
    pub unsafe fn avx_vnni(k4: usize, a: &[i32], b: &[u8], tile: &mut [[i32; 2 * NR]; MR]) {
        assert!(a.len() >= k4 * MR && b.len() >= k4 * NR * 4);
        let mut acc = [[_mm256_setzero_si256(); 2]; MR];
        for g in 0..k4 {
            // SAFETY: group g lies inside the panels (asserted above).
            unsafe {
                let p = b.as_ptr().add(g * NR * 4);
                let bv = [_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast())];
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_epi32(*a.get_unchecked(g * MR + r));
                    for (v, bh) in row.iter_mut().zip(bv) {
                        *v = _mm256_dpbusd_avx_epi32(*v, bh, x);
                    }
                }
            }
        }
        store256(acc, tile);
    }

    /// AVX2 without VNNI: each 32-bit lane of B holds a column's four bytes `b0 b1 b2 b3`; read as
    /// 16-bit lanes, masking gives `(b0, b2)` and shifting `(b1, b3)`, which `vpmaddwd` multiplies
    /// with A's words `(a0, a2)` and `(a1, a3)` and adds in 32 bits, exactly.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2(k4: usize, a: &[i32], b: &[u8], tile: &mut [[i32; 2 * NR]; MR]) {
        assert!(a.len() >= k4 * MR * 2 && b.len() >= k4 * NR * 4);
        let mut acc = [[_mm256_setzero_si256(); 2]; MR];
        let low = _mm256_set1_epi16(0x00ff);
        for g in 0..k4 {
            // SAFETY: group g lies inside the panels (asserted above).
            unsafe {
                let p = b.as_ptr().add(g * NR * 4);
                let raw = [_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast())];
                let even = raw.map(|v| _mm256_and_si256(v, low));
                let odd = raw.map(|v| _mm256_srli_epi16::<8>(v));
                for (r, row) in acc.iter_mut().enumerate() {
                    let we = _mm256_set1_epi32(*a.get_unchecked((g * MR + r) * 2));
                    let wo = _mm256_set1_epi32(*a.get_unchecked((g * MR + r) * 2 + 1));
                    for (h, v) in row.iter_mut().enumerate() {
                        let sum = _mm256_add_epi32(_mm256_madd_epi16(even[h], we), _mm256_madd_epi16(odd[h], wo));
                        *v = _mm256_add_epi32(*v, sum);
                    }
                }
            }
        }
        store256(acc, tile);
    }

    #[target_feature(enable = "avx2")]
    fn store256(acc: [[__m256i; 2]; MR], tile: &mut [[i32; 2 * NR]; MR]) {
        for (row, v) in tile.iter_mut().zip(acc) {
            for (h, part) in v.into_iter().enumerate() {
                // SAFETY: each tile row holds 32 lanes; h < 2 stores of 8.
                unsafe { _mm256_storeu_si256(row.as_mut_ptr().add(8 * h).cast(), part) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU runs gives the exact integer product, at shapes with edge tiles, K
    /// not a multiple of four, extreme codes (−128, 127 against 255: the products `vpmaddubsw`
    /// would saturate) and enough work to run threaded.
    #[test]
    fn every_kernel_is_exact() {
        for (m, k, n) in [(1, 1, 1), (5, 7, 9), (6, 8, 16), (13, 37, 45), (7, 301, 33), (64, 576, 200)] {
            let a: Vec<f32> = (0..m * k).map(|i| [-128.0, 127.0, ((i * 29 % 255) as f32) - 127.0][i % 3]).collect();
            let b: Vec<f32> = (0..k * n).map(|i| [127.0, ((i * 13 % 256) as f32) - 128.0][i % 2]).collect();
            let bias: Vec<i32> = (0..m).map(|r| r as i32 * 1000 - 7).collect();
            let offset = 128.0;
            let want: Vec<f32> = (0..m * n)
                .map(|i| {
                    let (r, c) = (i / n, i % n);
                    let dot: i64 = (0..k).map(|kk| a[r * k + kk] as i64 * (b[kk * n + c] + offset) as i64).sum();
                    (dot + bias[r] as i64) as f32
                })
                .collect();
            for kernel in IgemmKernel::ALL.into_iter().filter(|k| k.is_supported()) {
                let packed = PackedCodes::pack_for(kernel, &a, m, k).expect("integer codes");
                let mut c = vec![f32::NAN; m * n];
                igemm(&packed, &DenseCodes { data: &b, k, n, offset }, n, &bias, &mut c);
                assert_eq!(c, want, "{} at {m}×{k}×{n}", kernel.name());
            }
        }
    }

    #[test]
    fn refuses_what_is_not_an_8_bit_code() {
        assert!(PackedCodes::pack(&[1.0, 128.0], 1, 2).is_none());
        assert!(PackedCodes::pack(&[1.5, 2.0], 1, 2).is_none());
        assert_eq!(PackedCodes::pack(&[1.0, -128.0, 3.0, 4.0], 2, 2).map(|p| p.row_sums), Some(vec![-127, 7]));
    }
}
