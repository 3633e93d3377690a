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

/// [`retain_freed_memory`] for as long as a guard lives, in a process that is not mppq's (the
/// Python binding: the interpreter belongs to the user). Guards nest and overlap (a count); when
/// the last one is dropped, glibc's defaults are set back (at most 65,536 mmap'd blocks, a 128 KiB
/// trim threshold; glibc's own threshold adjustment stays off) and the freed memory is returned
/// to the system, so the process is as lean after the work as before it.
#[must_use = "the setting lasts as long as the guard"]
pub struct RetainedForJob(());

static RETAINING_GUARDS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// Starts a [`RetainedForJob`].
pub fn retain_freed_memory_for_job() -> RetainedForJob {
    let mut guards = RETAINING_GUARDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if *guards == 0 {
        retain_freed_memory();
    }
    *guards += 1;
    RetainedForJob(())
}

impl Drop for RetainedForJob {
    fn drop(&mut self) {
        let mut guards = RETAINING_GUARDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *guards = guards.saturating_sub(1);
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if *guards == 0 {
            // SAFETY: as in `retain_freed_memory`; `malloc_trim` only releases free memory.
            unsafe {
                libc::mallopt(libc::M_MMAP_MAX, 65_536);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
                libc::malloc_trim(0);
            }
        }
    }
}
