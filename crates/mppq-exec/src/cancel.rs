//! Stopping work from outside the thread that does it. A caller (the Python binding, on Ctrl-C)
//! calls [`request_stop`]; from then on every graph run of every executor fails at its start with
//! [`ExecError::Stopped`](crate::ExecError::Stopped), so a pass stops between batches through its
//! ordinary error path and nothing half-written is kept. Process-wide, like [`crate::budget`]: a
//! kernel has no handle on the run that called it. The caller clears it before its next job.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every run in this process to stop at its next graph run.
pub fn request_stop() {
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// Lets runs go on again (before starting new work).
pub fn clear_stop() {
    STOP_REQUESTED.store(false, Ordering::SeqCst);
}

/// Whether a stop was asked for since the last [`clear_stop`].
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

/// The error a graph run returns once a stop was asked for.
pub(crate) fn check() -> crate::Result<()> {
    if stop_requested() { Err(crate::ExecError::Stopped) } else { Ok(()) }
}
