//! Single-precision matrix product `C = A·B (+ bias per row)` for the CPU convolution, where A
//! (the weights) is packed once and B (the im2col columns) is packed panel by panel straight
//! from the input, never materialised whole.
//!
//! The shape is the classic one of BLIS/MLAS: A in panels of 6 rows, B in panels of 16 columns,
//! K blocked by [`KC`] so the B panels stay in L1 while the kernel walks an [`MC`]-row block of
//! A held in L2. The register tile is the kernel's ([`GemmKernel`], chosen at run time): 12×32
//! over two panels of each with AVX-512, 6×16 with AVX2+FMA or NEON, a portable kernel
//! elsewhere. Work is split into one task per thread, by columns (by rows only when there is a
//! single column tile), each task packing its own B.

use super::SharedOut;
use rayon::prelude::*;

/// Rows of the register tile (A panel height).
pub const MR: usize = 6;
/// Columns of the register tile (B panel width).
pub const NR: usize = 16;
/// K block: one B panel is `KC × NR` floats = 24 KiB, three quarters of L1 (256 measured ~1 %
/// slower on ResNet-18: one more write-back of C per 768 of depth).
const KC: usize = 384;
/// Rows of A walked per B panel: `MC × KC` floats = 216 KiB, held in L2.
const MC: usize = 144;
/// Columns of B packed at a time: `KC × NC` floats = 384 KiB, so the packed block is still
/// mostly in L2 when the kernel reads it (packing all columns of a 112×112 image at once spilled to
/// memory and halved the speed of ResNet-18's first layers).
const NC: usize = 256;
/// Below this many multiply-adds a product runs on the calling thread (thread start-up costs
/// more than it saves; measured on tiny_cnn's 32×32 convolutions).
const THREADED_MACS: usize = 1 << 21;

/// A row-major `m × k` matrix packed in panels of [`MR`] rows: `[panel][k][MR]`, zero-padded.
pub struct PackedA {
    m: usize,
    k: usize,
    data: Vec<f32>,
}

impl PackedA {
    /// Packs the row-major `m × k` matrix `a` (`a.len() == m * k`).
    pub fn pack(a: &[f32], m: usize, k: usize) -> Self {
        let panels = m.div_ceil(MR);
        let mut data = vec![0f32; panels * k * MR];
        data.par_chunks_mut(k * MR).enumerate().for_each(|(p, panel)| {
            for r in 0..MR.min(m - p * MR) {
                let row = &a[(p * MR + r) * k..][..k];
                for (kk, &v) in row.iter().enumerate() {
                    panel[kk * MR + r] = v;
                }
            }
        });
        Self { m, k, data }
    }
}

/// Where the columns of B come from: fills `out` (`[ceil(nc/NR)][kc][NR]`, zero beyond `nc`)
/// with rows `k0..k0+kc` and columns `n0..n0+nc` of B.
pub trait PanelSource: Sync {
    fn pack(&self, k0: usize, kc: usize, n0: usize, nc: usize, out: &mut [f32]);
}

/// `c` (row-major `m × n`, row stride `n`) = `a · B + bias[row]`, B `k × n` read from `b`, on
/// this CPU's fastest kernel ([`GemmKernel::detect`]).
pub fn gemm(a: &PackedA, b: &impl PanelSource, n: usize, bias: Option<&[f32]>, c: &mut [f32]) {
    gemm_with(GemmKernel::detect(), a, b, n, bias, c)
}

/// [`gemm`] on a chosen kernel (an unsupported one runs the portable kernel instead).
pub fn gemm_with(kernel: GemmKernel, a: &PackedA, b: &impl PanelSource, n: usize, bias: Option<&[f32]>, c: &mut [f32]) {
    let kernel = if kernel.is_supported() { kernel } else { GemmKernel::Portable };
    let (m, k) = (a.m, a.k);
    assert!(c.len() >= m * n && bias.is_none_or(|b| b.len() >= m));
    let threads = rayon::current_num_threads();
    // Work is shared in whole register tiles, so no task ends in a needless edge tile.
    let (tile_m, tile_n) = (kernel.tile_panels() * MR, kernel.tile_panels() * NR);
    let col_units = n.div_ceil(tile_n);
    let row_units = m.div_ceil(tile_m);
    // Tasks: a grid of (row range × column range), one per thread. Columns are split first: a
    // column task packs its own columns of B once, while row tasks sharing columns each pack
    // them again. More, smaller tasks balance better on a busy machine but cost traffic (each
    // column task streams all of A): on 2 idle cores ResNet-18 took 33.3 ms with four tasks per
    // thread, 31.2 ms with one; splitting its 7×7 layers by rows (all of B packed per task)
    // measured slower still.
    let (row_tasks, col_tasks) = if m * n * k < THREADED_MACS || threads == 1 {
        (1, 1)
    } else {
        let target = threads;
        let col_tasks = col_units.min(target);
        (row_units.min(target.div_ceil(col_tasks)), col_tasks)
    };
    // Task i of `parts` over `units` units of `size`: an even share, clamped to `len`.
    let share = |i: usize, parts: usize, units: usize, size: usize, len: usize| {
        (i * units / parts * size).min(len)..((i + 1) * units / parts * size).min(len)
    };
    let out = SharedOut(c.as_mut_ptr());
    // Tasks that share columns (few columns, many threads: a 7×7 layer on 16 threads) would each
    // pack the same columns of B; then B is packed once, in parallel, and every task reads it.
    let shared = (row_tasks > 1).then(|| SharedB::pack(b, k, n));
    let task = |t: usize| {
        let rows = share(t / col_tasks, row_tasks, row_units, tile_m, m);
        let cols = share(t % col_tasks, col_tasks, col_units, tile_n, n);
        if rows.is_empty() || cols.is_empty() {
            return;
        }
        // SAFETY: the kernel is supported (checked above); tasks cover disjoint (row range ×
        // column range) blocks of `c`, which is at least m×n with row stride n; each task writes
        // only inside its block.
        unsafe { block(kernel, a, b, shared.as_ref(), n, bias, &out, rows, cols) };
    };
    if row_tasks * col_tasks == 1 {
        task(0);
    } else {
        (0..row_tasks * col_tasks).into_par_iter().for_each(task);
    }
}

/// All of B packed, K block by K block, each as [`PanelSource::pack`] lays out every column:
/// `[panel][kc][NR]`. A task's columns (which start on a panel boundary) are then one contiguous
/// slice of each K block.
struct SharedB {
    data: Vec<f32>,
    panels: usize,
}

impl SharedB {
    fn pack(b: &impl PanelSource, k: usize, n: usize) -> Self {
        let (kcb, panels) = (k_block(k), n.div_ceil(NR));
        let mut data = vec![0f32; k * panels * NR];
        // Chunks of whole panels per K block: packing is spread over the threads too.
        let chunk = panels.div_ceil(rayon::current_num_threads()).max(1);
        let mut jobs = Vec::new();
        let mut rest = &mut data[..];
        for k0 in (0..k).step_by(kcb) {
            let kc = kcb.min(k - k0);
            let (region, tail) = rest.split_at_mut(panels * kc * NR);
            rest = tail;
            for (i, out) in region.chunks_mut(chunk * kc * NR).enumerate() {
                let n0 = i * chunk * NR;
                jobs.push((k0, kc, n0, (chunk * NR).min(n - n0), out));
            }
        }
        jobs.into_par_iter().for_each(|(k0, kc, n0, nc, out)| b.pack(k0, kc, n0, nc, out));
        Self { data, panels }
    }

    /// Panels from `first_panel` on, K rows `k0..k0 + kc` (a whole K block).
    fn panels(&self, k0: usize, kc: usize, first_panel: usize, count: usize) -> &[f32] {
        &self.data[k0 * self.panels * NR + first_panel * kc * NR..][..count * kc * NR]
    }
}

/// The K block size for depth `k`: blocks of equal size (576 = 3 × 192, not 256 + 256 + 64),
/// since a short last block pays the tile write-back for little work.
fn k_block(k: usize) -> usize {
    k.div_ceil(k.div_ceil(KC).max(1)).max(1)
}

/// One task: rows `rows` (starting on a panel boundary) × columns `cols` of C.
///
/// # Safety
/// `out` must point at a row-major buffer of at least `a.m × n` floats that nobody else reads or
/// writes inside this block.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    kernel: GemmKernel,
    a: &PackedA,
    b: &impl PanelSource,
    shared: Option<&SharedB>,
    n: usize,
    bias: Option<&[f32]>,
    out: &SharedOut,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let k = a.k;
    let kcb = k_block(k);
    let mut bbuf = if shared.is_some() { Vec::new() } else { vec![0f32; NC.min(cols.len()).div_ceil(NR) * kcb * NR] };
    // A register tile spans `tile_panels` panels of A and of B (two with AVX-512).
    let tile_panels = kernel.tile_panels();
    for nc0 in cols.clone().step_by(NC) {
        let nc = NC.min(cols.end - nc0);
        let panels = nc.div_ceil(NR);
        for k0 in (0..k).step_by(kcb) {
            let kc = kcb.min(k - k0);
            let bpack: &[f32] = match shared {
                Some(shared) => shared.panels(k0, kc, nc0 / NR, panels),
                None => {
                    let bpack = &mut bbuf[..panels * kc * NR];
                    b.pack(k0, kc, nc0, nc, bpack);
                    bpack
                }
            };
            for mc0 in rows.clone().step_by(MC) {
                let mc1 = rows.end.min(mc0 + MC);
                for r in (mc0..mc1).step_by(tile_panels * MR) {
                    let height = (tile_panels * MR).min(mc1 - r);
                    let a_panel = |i: usize| &a.data[(r / MR + i) * k * MR + k0 * MR..][..kc * MR];
                    let ap = [a_panel(0), if height > MR { a_panel(1) } else { &[] }];
                    let bias_rows = bias.map(|bv| &bv[r..r + height]);
                    for p in (0..panels).step_by(tile_panels) {
                        let col = nc0 + p * NR;
                        let width = (tile_panels * NR).min(nc0 + nc - col);
                        let b_panel = |i: usize| &bpack[(p + i) * kc * NR..][..kc * NR];
                        let bp = [b_panel(0), if width > NR { b_panel(1) } else { &[] }];
                        // SAFETY: the tile (r..r+height, col..col+width) lies inside this block.
                        unsafe { kernel.run(kc, ap, bp, out.at(r * n + col), n, height, width, k0 == 0, bias_rows) };
                    }
                }
            }
        }
    }
}

/// A register-tile kernel (the innermost product): one per instruction set, chosen at run time
/// ([`GemmKernel::detect`]) or by name with `MPPQ_GEMM_KERNEL` (for benchmarks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmKernel {
    /// 12×32 tile (24 16-lane accumulators over two A and two B panels), x86-64 with AVX-512F.
    Avx512,
    /// 6×16 tile (12 8-lane accumulators), x86-64 with AVX2 and FMA.
    Avx2Fma,
    /// 6×16 tile (24 4-lane accumulators), every aarch64 CPU.
    Neon,
    /// 6×16 tile in plain Rust, vectorised by the compiler for the build's baseline.
    Portable,
}

impl GemmKernel {
    /// Every kernel, fastest first.
    pub const ALL: [GemmKernel; 4] = [GemmKernel::Avx512, GemmKernel::Avx2Fma, GemmKernel::Neon, GemmKernel::Portable];

    /// The kernel `gemm` uses: `MPPQ_GEMM_KERNEL` when it names one this CPU runs, else the
    /// fastest this CPU runs. Decided once per process.
    pub fn detect() -> Self {
        static CHOSEN: std::sync::OnceLock<GemmKernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            super::choose_kernel("MPPQ_GEMM_KERNEL", &Self::ALL, Self::name, Self::is_supported, GemmKernel::Portable)
        })
    }

    /// Whether this CPU runs the kernel.
    pub fn is_supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            GemmKernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            GemmKernel::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
            }
            GemmKernel::Neon => cfg!(target_arch = "aarch64"),
            GemmKernel::Portable => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The kernel's name, as `MPPQ_GEMM_KERNEL` and the bench write it.
    pub fn name(self) -> &'static str {
        match self {
            GemmKernel::Avx512 => "avx512",
            GemmKernel::Avx2Fma => "avx2",
            GemmKernel::Neon => "neon",
            GemmKernel::Portable => "portable",
        }
    }

    /// A and B panels per register tile.
    fn tile_panels(self) -> usize {
        match self {
            GemmKernel::Avx512 => 2,
            _ => 1,
        }
    }

    /// Computes the `height × width` tile at `c` (row stride `ldc`): `c = acc + bias` when
    /// `first`, else `c += acc`, where `acc` is the product of the A panels `a` (rows `0..MR`
    /// from `a[0]`, `MR..` from `a[1]`) and the B panels `b` (columns `0..NR` from `b[0]`, `NR..`
    /// from `b[1]`) over `kc`. A second panel is empty when the tile does not reach it.
    ///
    /// # Safety
    /// The kernel must be supported; `c` must be valid for the tile; each panel needed holds
    /// `kc × MR` (A) or `kc × NR` (B) floats.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run(
        self,
        kc: usize,
        a: [&[f32]; 2],
        b: [&[f32]; 2],
        c: *mut f32,
        ldc: usize,
        height: usize,
        width: usize,
        first: bool,
        bias: Option<&[f32]>,
    ) {
        // SAFETY (all arms): the kernel's instruction set is supported (the caller's contract).
        #[cfg(target_arch = "x86_64")]
        if self == GemmKernel::Avx512 {
            if height == 2 * MR && width == 2 * NR {
                return unsafe { avx512::full_tile(kc, a, b, c, ldc, first, bias) };
            }
            let mut tile = [[0f32; 2 * NR]; 2 * MR];
            unsafe { avx512::tile(kc, a, b, height, width, &mut tile) };
            return unsafe { write_tile(&tile, c, ldc, height, width, first, bias) };
        }
        #[cfg(target_arch = "x86_64")]
        if self == GemmKernel::Avx2Fma && height == MR && width == NR {
            return unsafe { avx2::full_tile(kc, a[0], b[0], c, ldc, first, bias) };
        }
        let mut tile = [[0f32; NR]; MR];
        match self {
            #[cfg(target_arch = "x86_64")]
            GemmKernel::Avx2Fma => unsafe { avx2::tile(kc, a[0], b[0], height, width, &mut tile) },
            #[cfg(target_arch = "aarch64")]
            GemmKernel::Neon => neon::tile(kc, a[0], b[0], &mut tile),
            _ => portable_tile(kc, a[0], b[0], &mut tile),
        }
        // SAFETY: the caller's tile.
        unsafe { write_tile(&tile, c, ldc, height, width, first, bias) }
    }
}

/// Writes the first `height × width` values of a computed tile to C (`= v + bias` when `first`,
/// else `+= v`).
///
/// # Safety
/// `c` must be valid for `height` rows of `width` floats, `ldc` apart.
unsafe fn write_tile<const W: usize>(
    tile: &[[f32; W]],
    c: *mut f32,
    ldc: usize,
    height: usize,
    width: usize,
    first: bool,
    bias: Option<&[f32]>,
) {
    for (r, acc) in tile.iter().enumerate().take(height) {
        // SAFETY: row r < height and columns < width lie inside the caller's tile.
        let row = unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc), width) };
        if first {
            let b = bias.map_or(0.0, |bv| bv[r]);
            row.iter_mut().zip(acc).for_each(|(o, v)| *o = v + b);
        } else {
            row.iter_mut().zip(acc).for_each(|(o, v)| *o += v);
        }
    }
}

/// The tile product in plain Rust (the compiler vectorises the 16-wide rows).
fn portable_tile(kc: usize, a: &[f32], b: &[f32], tile: &mut [[f32; NR]; MR]) {
    for (av, bv) in a.chunks_exact(MR).zip(b.chunks_exact(NR)).take(kc) {
        for (row, &x) in tile.iter_mut().zip(av) {
            row.iter_mut().zip(bv).for_each(|(o, &y)| *o += x * y);
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{MR, NR};
    use std::arch::aarch64::*;

    /// The 6×16 product with 24 accumulators of 4 lanes (NEON is part of every aarch64 CPU, so
    /// there is nothing to detect).
    pub fn tile(kc: usize, a: &[f32], b: &[f32], tile: &mut [[f32; NR]; MR]) {
        assert!(a.len() >= kc * MR && b.len() >= kc * NR);
        // SAFETY: NEON is baseline on aarch64; kc steps of MR (a) and NR (b) floats stay inside
        // the slices (asserted); each tile row holds 16 floats.
        unsafe {
            let mut acc = [[vdupq_n_f32(0.0); 4]; MR];
            let (mut a_ptr, mut b_ptr) = (a.as_ptr(), b.as_ptr());
            for _ in 0..kc {
                let bv = [vld1q_f32(b_ptr), vld1q_f32(b_ptr.add(4)), vld1q_f32(b_ptr.add(8)), vld1q_f32(b_ptr.add(12))];
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = *a_ptr.add(r);
                    for (v, bq) in row.iter_mut().zip(bv) {
                        *v = vfmaq_n_f32(*v, bq, x);
                    }
                }
                a_ptr = a_ptr.add(MR);
                b_ptr = b_ptr.add(NR);
            }
            for (row, v) in tile.iter_mut().zip(acc) {
                for (h, q) in v.into_iter().enumerate() {
                    vst1q_f32(row.as_mut_ptr().add(4 * h), q);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// `R` rows (the first `MR` from A panel 0, the rest from panel 1) × `H` 16-lane
    /// accumulators per row (one per B panel); one broadcast per row and k. 12 × 2 uses 24 of
    /// the 32 vector registers, leaving room for the two B vectors and the broadcast.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn accumulate<const R: usize, const H: usize>(
        kc: usize,
        a: [&[f32]; 2],
        b: [&[f32]; 2],
    ) -> [[__m512; H]; R] {
        assert!(R <= 2 * MR && H <= 2 && a[0].len() >= kc * MR && b[0].len() >= kc * NR);
        assert!((R <= MR || a[1].len() >= kc * MR) && (H < 2 || b[1].len() >= kc * NR));
        let mut acc = [[_mm512_setzero_ps(); H]; R];
        for k in 0..kc {
            // SAFETY: step k of each panel used lies inside it (asserted above).
            unsafe {
                let mut bv = [_mm512_setzero_ps(); H];
                for (h, v) in bv.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(b[h].as_ptr().add(k * NR));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let src = if r < MR { a[0].as_ptr().add(k * MR + r) } else { a[1].as_ptr().add(k * MR + r - MR) };
                    let x = _mm512_set1_ps(*src);
                    for (h, v) in row.iter_mut().enumerate() {
                        *v = _mm512_fmadd_ps(x, bv[h], *v);
                    }
                }
            }
        }
        acc
    }

    /// `accumulate::<R, H>` stored into the first `R` rows and `16·H` columns of `tile`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn store<const R: usize, const H: usize>(
        kc: usize,
        a: [&[f32]; 2],
        b: [&[f32]; 2],
        tile: &mut [[f32; 2 * NR]; 2 * MR],
    ) {
        // SAFETY: the caller guarantees AVX-512F; each row holds 32 floats, H ≤ 2 stores of 16.
        unsafe {
            for (row, v) in tile.iter_mut().zip(accumulate::<R, H>(kc, a, b)) {
                for (h, part) in v.iter().enumerate() {
                    _mm512_storeu_ps(row.as_mut_ptr().add(16 * h), *part);
                }
            }
        }
    }

    /// The product into a scratch tile (edge tiles): only the rows (`height`, rounded up to an
    /// even count) and B panels (`width`) that hold results are computed.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn tile(
        kc: usize,
        a: [&[f32]; 2],
        b: [&[f32]; 2],
        height: usize,
        width: usize,
        tile: &mut [[f32; 2 * NR]; 2 * MR],
    ) {
        macro_rules! by_height {
            ($h:literal) => {
                match height {
                    0..=2 => store::<2, $h>(kc, a, b, tile),
                    3..=4 => store::<4, $h>(kc, a, b, tile),
                    5..=6 => store::<6, $h>(kc, a, b, tile),
                    7..=8 => store::<8, $h>(kc, a, b, tile),
                    9..=10 => store::<10, $h>(kc, a, b, tile),
                    _ => store::<12, $h>(kc, a, b, tile),
                }
            };
        }
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { if width <= NR { by_height!(1) } else { by_height!(2) } }
    }

    /// The product straight into a full 12×32 tile of C: `c = acc + bias` when `first`, else
    /// `c += acc`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `c` must be valid for 12 rows of 32 floats, `ldc` apart.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn full_tile(
        kc: usize,
        a: [&[f32]; 2],
        b: [&[f32]; 2],
        c: *mut f32,
        ldc: usize,
        first: bool,
        bias: Option<&[f32]>,
    ) {
        // SAFETY: the caller guarantees AVX-512F and the tile's extent.
        unsafe {
            let acc = accumulate::<{ 2 * MR }, 2>(kc, a, b);
            for (r, acc) in acc.iter().enumerate() {
                let row = c.add(r * ldc);
                let (lo, hi) = if first {
                    let v = _mm512_set1_ps(bias.map_or(0.0, |bv| bv[r]));
                    (v, v)
                } else {
                    (_mm512_loadu_ps(row), _mm512_loadu_ps(row.add(16)))
                };
                _mm512_storeu_ps(row, _mm512_add_ps(lo, acc[0]));
                _mm512_storeu_ps(row.add(16), _mm512_add_ps(hi, acc[1]));
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// `R` rows (of the `MR`-row panel `a`) × `H` 8-lane accumulators per row (H = 2: the full
    /// 16 columns; H = 1: a panel with at most 8 useful columns, at half the work); one B load
    /// per half and one broadcast per row and k. Edge tiles use fewer rows or halves.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn accumulate<const R: usize, const H: usize>(kc: usize, a: &[f32], b: &[f32]) -> [[__m256; H]; R] {
        assert!(R <= MR && a.len() >= kc * MR && b.len() >= kc * NR);
        let (mut a_ptr, mut b_ptr) = (a.as_ptr(), b.as_ptr());
        let mut acc = [[_mm256_setzero_ps(); H]; R];
        for _ in 0..kc {
            // SAFETY: kc steps of MR (a) and NR (b) floats stay inside the slices (asserted).
            unsafe {
                let mut bv = [_mm256_setzero_ps(); H];
                for (h, v) in bv.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(b_ptr.add(8 * h));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*a_ptr.add(r));
                    for (h, v) in row.iter_mut().enumerate() {
                        *v = _mm256_fmadd_ps(x, bv[h], *v);
                    }
                }
                a_ptr = a_ptr.add(MR);
                b_ptr = b_ptr.add(NR);
            }
        }
        acc
    }

    /// `accumulate::<R, H>` stored into the first `R` rows and `8·H` columns of `tile`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store<const R: usize, const H: usize>(kc: usize, a: &[f32], b: &[f32], tile: &mut [[f32; NR]; MR]) {
        // SAFETY: the caller guarantees AVX2+FMA; each row holds 16 floats, H ≤ 2 stores of 8.
        unsafe {
            for (row, v) in tile.iter_mut().zip(accumulate::<R, H>(kc, a, b)) {
                for (h, half) in v.iter().enumerate() {
                    _mm256_storeu_ps(row.as_mut_ptr().add(8 * h), *half);
                }
            }
        }
    }

    /// The product into a scratch tile (edge tiles): only the rows (`height`, rounded up to
    /// an even count) and halves (`width`) that hold results are computed — ResNet's 64, 128,
    /// 256 and 512 channels all end in a 2- or 4-row panel.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn tile(kc: usize, a: &[f32], b: &[f32], height: usize, width: usize, tile: &mut [[f32; NR]; MR]) {
        // SAFETY: the caller guarantees AVX2+FMA.
        unsafe {
            match (height, width <= 8) {
                (0..=2, true) => store::<2, 1>(kc, a, b, tile),
                (0..=2, false) => store::<2, 2>(kc, a, b, tile),
                (3..=4, true) => store::<4, 1>(kc, a, b, tile),
                (3..=4, false) => store::<4, 2>(kc, a, b, tile),
                (_, true) => store::<MR, 1>(kc, a, b, tile),
                (_, false) => store::<MR, 2>(kc, a, b, tile),
            }
        }
    }

    /// The product straight into a full 6×16 tile of C: `c = acc + bias` when `first`, else
    /// `c += acc`, without a scratch round trip.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `c` must be valid for 6 rows of 16 floats, `ldc` apart.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn full_tile(
        kc: usize,
        a: &[f32],
        b: &[f32],
        c: *mut f32,
        ldc: usize,
        first: bool,
        bias: Option<&[f32]>,
    ) {
        // SAFETY: the caller guarantees AVX2+FMA and the tile's extent.
        unsafe {
            let acc = accumulate::<MR, 2>(kc, a, b);
            for (r, acc) in acc.iter().enumerate() {
                let row = c.add(r * ldc);
                let (lo, hi) = if first {
                    let v = _mm256_set1_ps(bias.map_or(0.0, |bv| bv[r]));
                    (v, v)
                } else {
                    (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)))
                };
                _mm256_storeu_ps(row, _mm256_add_ps(lo, acc[0]));
                _mm256_storeu_ps(row.add(8), _mm256_add_ps(hi, acc[1]));
            }
        }
    }
}

/// Writes the values of B's row `kk` (of the block being packed) for the block's columns
/// `j..j + values.len()` into their panels (`out` laid out `[panel][kc][NR]`).
///
/// Sources are walked row by row (contiguous reads) and scattered into panels in pieces of at
/// most [`NR`]: reading 16 columns of each of K rows in turn was a stride of a whole row per
/// read and made packing as slow as the arithmetic on ResNet-18's first layer.
#[inline]
pub fn put_row(out: &mut [f32], kc: usize, kk: usize, mut j: usize, mut values: &[f32]) {
    while !values.is_empty() {
        let (panel, lane) = (j / NR, j % NR);
        let seg = (NR - lane).min(values.len());
        out[(panel * kc + kk) * NR + lane..][..seg].copy_from_slice(&values[..seg]);
        values = &values[seg..];
        j += seg;
    }
}

/// [`put_row`] for the values `src[0], src[step], src[2·step], …` (`len` of them): strided
/// convolutions read every `step`-th input column.
#[inline]
pub fn put_row_strided(out: &mut [f32], kc: usize, kk: usize, mut j: usize, src: &[f32], step: usize, mut len: usize) {
    let mut values = src.iter().step_by(step);
    while len > 0 {
        let (panel, lane) = (j / NR, j % NR);
        let seg = (NR - lane).min(len);
        for (d, v) in out[(panel * kc + kk) * NR + lane..][..seg].iter_mut().zip(&mut values) {
            *d = *v;
        }
        len -= seg;
        j += seg;
    }
}

/// Zeros B's row `kk` for the block's columns `j..j + len` (padding).
#[inline]
pub fn zero_row(out: &mut [f32], kc: usize, kk: usize, mut j: usize, mut len: usize) {
    while len > 0 {
        let (panel, lane) = (j / NR, j % NR);
        let seg = (NR - lane).min(len);
        out[(panel * kc + kk) * NR + lane..][..seg].fill(0.0);
        len -= seg;
        j += seg;
    }
}

/// B given as a plain row-major `k × n` matrix (1×1 convolutions, tests).
pub struct DenseB<'a> {
    pub data: &'a [f32],
    pub n: usize,
}

impl PanelSource for DenseB<'_> {
    fn pack(&self, k0: usize, kc: usize, n0: usize, nc: usize, out: &mut [f32]) {
        let padded = nc.div_ceil(NR) * NR;
        for kk in 0..kc {
            put_row(out, kc, kk, 0, &self.data[(k0 + kk) * self.n + n0..][..nc]);
            zero_row(out, kc, kk, nc, padded - nc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(m: usize, n: usize, k: usize, with_bias: bool) {
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.125).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.25).collect();
        let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.5 - 1.0).collect();
        let mut c = vec![f32::NAN; m * n];
        gemm(&PackedA::pack(&a, m, k), &DenseB { data: &b, n }, n, with_bias.then_some(&bias[..]), &mut c);
        for i in 0..m {
            for j in 0..n {
                let mut want = if with_bias { bias[i] } else { 0.0 };
                for l in 0..k {
                    want += a[i * k + l] * b[l * n + j];
                }
                let got = c[i * n + j];
                assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{m}x{n}x{k} [{i},{j}]: {got} vs {want}");
            }
        }
    }

    #[test]
    fn products_of_every_edge_shape() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 16, 3),
            (7, 17, 5),
            (5, 3, 300),
            (9, 20, 7),
            (8, 33, 11),
            (10, 5, 3),
            (13, 40, 257),
            (64, 49, 520),
        ] {
            check(m, n, k, false);
            check(m, n, k, true);
        }
    }

    #[test]
    fn threaded_split_by_rows_and_by_columns() {
        check(130, 33, 600, true); // few columns: split by rows
        check(20, 700, 300, true); // many columns: split by columns
        // More threads than column tiles: row tasks read one B packed for all of them, in two
        // and three K blocks, from column tasks that start at panel 0, 2 and 4.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(8).build().unwrap();
        pool.install(|| {
            check(130, 33, 600, true);
            check(200, 70, 900, false);
        });
    }

    #[test]
    fn every_supported_kernel_matches_the_portable_one() {
        // Shapes with full tiles of every kernel and every kind of edge (rows and columns).
        for &(m, n, k) in &[(12, 32, 9), (24, 64, 400), (13, 45, 7), (7, 17, 5), (30, 100, 33), (1, 1, 1)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.125).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.25).collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.5 - 1.0).collect();
            let packed = PackedA::pack(&a, m, k);
            let mut want = vec![0f32; m * n];
            gemm_with(GemmKernel::Portable, &packed, &DenseB { data: &b, n }, n, Some(&bias), &mut want);
            for kernel in GemmKernel::ALL.into_iter().filter(|k| k.is_supported()) {
                let mut got = vec![f32::NAN; m * n];
                gemm_with(kernel, &packed, &DenseB { data: &b, n }, n, Some(&bias), &mut got);
                for (i, (p, q)) in want.iter().zip(&got).enumerate() {
                    assert!((p - q).abs() <= 1e-4 * p.abs().max(1.0), "{kernel:?} {m}x{n}x{k} [{i}]: {q} vs {p}");
                }
            }
        }
    }

    #[test]
    fn the_kernel_is_one_this_cpu_runs() {
        assert!(GemmKernel::detect().is_supported());
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") && std::env::var_os("MPPQ_GEMM_KERNEL").is_none() {
            assert_eq!(GemmKernel::detect(), GemmKernel::Avx512);
        }
        #[cfg(target_arch = "aarch64")]
        if std::env::var_os("MPPQ_GEMM_KERNEL").is_none() {
            assert_eq!(GemmKernel::detect(), GemmKernel::Neon);
        }
    }
}
