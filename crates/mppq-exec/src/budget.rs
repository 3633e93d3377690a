//! The memory budget of one tensor. An operator whose output size comes from input values or
//! attributes (Tile, Pad, Expand, ConstantOfShape, Range, OneHot, Resize, ...) checks the size
//! against it before allocating, so an absurd size is an error naming the node instead of an
//! allocation failure that aborts the process. Process-wide, as a kernel has no handle on the
//! run's settings; `mppq` sets it from `max_tensor_mib` / `--max-tensor-mib`.
//!
//! Beside it, the iteration budget of one Loop (`max_loop_iterations`): [`DEFAULT_MAX_LOOP_ITERATIONS`]
//! unless set. ONNX Runtime has no limit, so a hostile trip count of 2^62 runs until stopped
//! there; here it is an error naming the node and the setting that raises it.

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

/// Iterations one run of a Loop may take unless `max_loop_iterations` says otherwise: far more
/// than decoding loops, NMS or beam searches take (thousands), far fewer than a loop that never
/// ends would run before anyone notices.
pub const DEFAULT_MAX_LOOP_ITERATIONS: u64 = 1_000_000;

/// 0: not set, use [`DEFAULT_MAX_LOOP_ITERATIONS`].
static MAX_LOOP_ITERATIONS: AtomicU64 = AtomicU64::new(0);

/// Sets the most iterations one run of a Loop may take (0: the default again).
pub fn set_max_loop_iterations(iterations: u64) {
    MAX_LOOP_ITERATIONS.store(iterations, Ordering::Relaxed);
}

/// The iteration limit in force.
pub fn max_loop_iterations() -> u64 {
    match MAX_LOOP_ITERATIONS.load(Ordering::Relaxed) {
        0 => DEFAULT_MAX_LOOP_ITERATIONS,
        n => n,
    }
}

/// Half the memory this process may use, else 8 GiB: one tensor larger than that leaves no
/// room for the rest of a run.
pub fn default_max_tensor_bytes() -> u64 {
    static DEFAULT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| usable_memory().map_or(8 << 30, |m| m / 2))
}

/// The memory this process may use: the least of the machine's physical memory
/// (`/proc/meminfo`), its cgroup's limit (a container's `memory.max`, v2 or v1) and its
/// address-space limit (`ulimit -v`, from `/proc/self/limits`). Only the first was read before,
/// so under a container or `ulimit` limit a tensor within the budget aborted the process.
pub fn usable_memory() -> Option<u64> {
    [physical_memory(), cgroup_limit(), address_space_limit()].into_iter().flatten().min()
}

fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `memory.max` of this process's cgroup (v2), or v1's `memory.limit_in_bytes`; `max` or an
/// absurdly large v1 value means no limit.
fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
            candidates.push("/sys/fs/cgroup/memory.max".to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
            candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string());
        }
    }
    candidates
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| t.trim().parse::<u64>().ok())
        .find(|&b| b < (1 << 62))
}

/// The soft `Max address space` of `/proc/self/limits` (`ulimit -v`), in bytes.
fn address_space_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
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
