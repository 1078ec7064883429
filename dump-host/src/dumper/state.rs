//! [`DumpState`]: the part of a Dumper that says whether a kernel is dumped at all right now —
//! closed or not, recording or not (msprobe's start / stop), overflow mode's count of kernels
//! written — and whether outputs are watched for NaN/Inf.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The switches every kernel call reads first (one atomic load each).
pub(crate) struct DumpState {
    /// Set by [`crate::Dumper::close`]: steps still held by the runtime dump nothing more.
    closed: AtomicBool,
    /// Kernels are dumped (cleared by [`crate::Dumper::stop`], set by
    /// [`crate::Dumper::start`]).
    recording: AtomicBool,
    /// Kernels whose outputs overflowed (overflow mode, against `overflow_number`).
    overflowed: AtomicU64,
    /// Outputs are checked for NaN/Inf (a flight recorder, or a policy other than continue).
    watching: bool,
}

impl DumpState {
    /// Open and recording; `watching` as the plan says.
    pub(crate) fn new(watching: bool) -> Self {
        DumpState {
            closed: AtomicBool::new(false),
            recording: AtomicBool::new(true),
            overflowed: AtomicU64::new(0),
            watching,
        }
    }

    /// The Dumper was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes: every later kernel call dumps nothing.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Kernels are dumped now (between start and stop).
    pub(crate) fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Starts (`true`) or stops recording.
    pub(crate) fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }

    /// Kernels whose outputs overflowed so far.
    pub(crate) fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Counts one more overflowed kernel; the count before it.
    pub(crate) fn count_overflow(&self) -> u64 {
        self.overflowed.fetch_add(1, Ordering::Relaxed)
    }

    /// Outputs are checked for NaN/Inf.
    pub(crate) fn watching(&self) -> bool {
        self.watching
    }
}
