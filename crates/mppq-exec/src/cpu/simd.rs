//! Run-time choice of instruction set for plain Rust loops: [`simd_dispatch!`] compiles one
//! `#[inline(always)]` body for AVX-512, for AVX2+FMA and for the baseline, and calls the widest
//! this CPU runs. The body stays ordinary code the compiler vectorizes; FMA being enabled does
//! not change results (Rust never contracts `a * b + c`; only an explicit `mul_add` fuses), so
//! a loop that avoids `mul_add` gives the same numbers on every CPU.

/// `simd_dispatch!(pub fn name<F: Bound>(args..) => body);` defines `name` with `body`'s
/// signature (no return value), running `body` compiled for the best instruction set available.
/// Used by the elementwise maps, depthwise convolution and `mppq-quant`'s histograms.
#[macro_export]
macro_rules! simd_dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident $(<$g:ident: $bound:path>)? ($($arg:ident: $ty:ty),* $(,)?) => $body:path) => {
        $(#[$meta])*
        $vis fn $name $(<$g: $bound>)? ($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma,sse4.1")]
                fn avx512 $(<$g: $bound>)? ($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma,sse4.1")]
                fn avx2 $(<$g: $bound>)? ($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F (and with it AVX2, FMA and SSE4.1).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has AVX2 and FMA (and with them SSE4.1).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
