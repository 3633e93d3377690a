//! Keeping freed tensor memory in the process for the next tensor of the same size.
//!
//! Every forward pass allocates and frees the same large activation buffers. glibc's `malloc`
//! serves blocks above its mmap threshold with a fresh `mmap` and unmaps them on `free`, so each
//! pass faults every activation page in again, and the kernel zeroes each page first. On the
//! DNSMOS model of the real-model corpus (M30) that was 7.2 million minor page faults and 13 s of
//! system time in a 30 s `mppq quantize`. Served from the heap, and with the heap never trimmed,
//! the next pass reuses the pages of the last: 0.24 million faults, 0.5 s of system time, the
//! same peak RSS (the freed memory is what the next pass needs anyway).
//!
//! This is a setting of the whole process, so it is the program's choice, not the library's:
//! the `mppq` CLI and the xtask call [`retain_freed_memory`] first thing, and a program that
//! embeds mppq may do the same. On other C libraries and systems (musl, macOS, Windows) it does
//! nothing: their allocators keep freed memory for reuse on their own terms.

/// Makes glibc serve large blocks from its heap and never give the heap's top back to the
/// system. Returns whether the allocator took the setting (always `false` off glibc).
pub fn retain_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes two tuning parameters of the allocator, under its own
        // lock; memory already allocated stays valid. A block `brk` cannot hold is still
        // served by `mmap` (glibc falls back to it), so this cannot make an allocation fail.
        unsafe { libc::mallopt(libc::M_MMAP_MAX, 0) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
