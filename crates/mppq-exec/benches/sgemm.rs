//! The matrix product under our convolution, on ResNet-18's convolution shapes (M output
//! channels, K = C·kh·kw, N output pixels at 1×3×224×224): each of our register-tile kernels
//! this CPU runs, against the `gemm` crate (Burn's CPU matmul) on the same product, so the
//! choice between our kernels and a crate is made on numbers (`docs/executor.md`).
//!
//! The int8 product under the simulation's integer convolution (`igemm`) on the same shapes,
//! per kernel this CPU runs: the same operation count, in integer operations.
//!
//! `cargo bench -p mppq-exec --bench sgemm`; GFLOP/s (GOP/s) = 2·M·N·K / time.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mppq_exec::cpu::igemm::{DenseCodes, IgemmKernel, PackedCodes, igemm};
use mppq_exec::cpu::sgemm::{DenseB, GemmKernel, PackedA, gemm_with};
use std::hint::black_box;

/// (name, M, K, N): conv1 (7×7/2), and the 3×3 layers of each stage.
const SHAPES: [(&str, usize, usize, usize); 5] = [
    ("conv1_64x147x12544", 64, 147, 12544),
    ("layer1_64x576x3136", 64, 576, 3136),
    ("layer2_128x1152x784", 128, 1152, 784),
    ("layer3_256x2304x196", 256, 2304, 196),
    ("layer4_512x4608x49", 512, 4608, 49),
];

fn values(len: usize, seed: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * seed % 17) as f32 - 8.0) * 0.0625).collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sgemm");
    group.sample_size(20);
    for (name, m, k, n) in SHAPES {
        let (a, b) = (values(m * k, 7), values(k * n, 5));
        let packed = PackedA::pack(&a, m, k);
        let mut out = vec![0f32; m * n];
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        for kernel in GemmKernel::ALL.into_iter().filter(|k| k.is_supported()) {
            group.bench_function(BenchmarkId::new(kernel.name(), name), |bench| {
                bench.iter(|| gemm_with(kernel, &packed, &DenseB { data: &b, n }, n, None, black_box(&mut out)))
            });
        }
        let threads = rayon::current_num_threads();
        group.bench_function(BenchmarkId::new("gemm-crate", name), |bench| {
            bench.iter(|| {
                // SAFETY: row-major m×k, k×n and m×n buffers of the stated sizes.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        black_box(out.as_mut_ptr()),
                        1,
                        n as isize,
                        false,
                        a.as_ptr(),
                        1,
                        k as isize,
                        b.as_ptr(),
                        1,
                        n as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(threads),
                    )
                }
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("igemm");
    group.sample_size(20);
    for (name, m, k, n) in SHAPES {
        let codes =
            |len: usize, seed: usize| -> Vec<f32> { (0..len).map(|i| (i * seed % 255) as f32 - 127.0).collect() };
        let (a, b, bias) = (codes(m * k, 7), codes(k * n, 5), vec![0i32; m]);
        let mut out = vec![0f32; m * n];
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        for kernel in IgemmKernel::ALL.into_iter().filter(|k| k.is_supported()) {
            let Some(packed) = PackedCodes::pack_for(kernel, &a, m, k) else { continue };
            let source = DenseCodes { data: &b, k, n, offset: 128.0 };
            group.bench_function(BenchmarkId::new(kernel.name(), name), |bench| {
                bench.iter(|| igemm(&packed, &source, n, &bias, black_box(&mut out)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
