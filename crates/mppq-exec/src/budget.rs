//! The memory budget of one tensor. An operator whose output size comes from input values or
//! attributes (Tile, Pad, Expand, ConstantOfShape, Range, OneHot, Resize, ...) checks the size
//! against it before allocating, so an absurd size is an error naming the node instead of an
//! allocation failure that aborts the process. Process-wide, as a kernel has no handle on the
//! run's settings; `mppq` sets it from `max_tensor_mib` / `--max-tensor-mib`.
//!
//! Beside it, the iteration budget of one Loop (`max_loop_iterations`): unlimited by default,
//! as in ONNX Runtime, so a model whose loop never ends runs until stopped unless a limit is set.

use std::sync::atomic::{AtomicU64, Ordering};

/// 0: not set, use [`default_max_tensor_bytes`].
static MAX_TENSOR_BYTES: AtomicU64 = AtomicU64::new(0);

/// Sets the largest tensor, in bytes, an operator may allocate from computed sizes (0: the
/// default again).
pub fn set_max_tensor_bytes(bytes: u64) {
    MAX_TENSOR_BYTES.store(bytes, Ordering::Relaxed);
}

/// The budget in force.
pub fn max_tensor_bytes() -> u64 {
    match MAX_TENSOR_BYTES.load(Ordering::Relaxed) {
        0 => default_max_tensor_bytes(),
        b => b,
    }
}

/// 0: no limit.
static MAX_LOOP_ITERATIONS: AtomicU64 = AtomicU64::new(0);

/// Sets the most iterations one run of a Loop may take (0: no limit, the default).
pub fn set_max_loop_iterations(iterations: u64) {
    MAX_LOOP_ITERATIONS.store(iterations, Ordering::Relaxed);
}

/// The iteration limit in force, if any.
pub fn max_loop_iterations() -> Option<u64> {
    match MAX_LOOP_ITERATIONS.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Half the machine's physical memory (Linux: `/proc/meminfo`), else 8 GiB: one tensor larger
/// than that leaves no room for the rest of a run.
pub fn default_max_tensor_bytes() -> u64 {
    static DEFAULT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| physical_memory().map_or(8 << 30, |m| m / 2))
}

fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The element count of `shape`, or a message saying why a tensor of it, `element_bytes` per
/// element, cannot be allocated.
pub fn check(shape: &[usize], element_bytes: usize) -> Result<usize, String> {
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let bytes = count.and_then(|n| (n as u64).checked_mul(element_bytes as u64));
    let budget = max_tensor_bytes();
    match (count, bytes) {
        (Some(n), Some(b)) if b <= budget => Ok(n),
        (_, b) => Err(format!(
            "an output of shape {shape:?} would take {}, over the {} MiB one tensor may take (max_tensor_mib / --max-tensor-mib)",
            b.map_or("more bytes than exist".to_string(), |b| format!("{} MiB", b >> 20)),
            budget >> 20
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_over_the_budget_or_overflowing_are_refused() {
        assert_eq!(check(&[2, 3], 4), Ok(6));
        assert!(check(&[usize::MAX, 2], 1).unwrap_err().contains("more bytes than exist"));
        let budget = max_tensor_bytes() as usize;
        assert!(check(&[budget / 4 + 1], 4).is_err());
        assert!(check(&[budget / 4], 4).is_ok());
    }
}
