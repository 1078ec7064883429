//! The background writer: worker threads fed through a byte-bounded queue, and direct writes
//! on the caller's thread for tensors too large to be worth copying.
//!
//! A queued job must own its bytes (the runtime may reuse a tensor's memory as soon as the
//! Dumper returns), so a borrowed tensor is copied before it is queued. For small tensors that
//! is cheap and keeps each file's `openat`/`rename` latency (70 µs to 1 ms) off the caller's
//! thread. For large ones the copy buys nothing on a 2-core machine: the caller soon waits for
//! budget anyway, fresh copy buffers cost page faults, and the copy competes with the writer
//! threads for memory bandwidth. On the reference VM, 8 × 64 MiB tensors copied and queued to
//! 2 threads reached about 0.5× of `std::fs::write`, written directly 0.96× (BENCHMARKS.md,
//! "Dumper"); from about 8 MiB up, copy + queue no longer reliably beat direct writes in total
//! time, below 4 MiB it was as fast or faster and freed the caller much sooner.
//! [`Writer::writes_direct`] draws the line ([`WriterConfig::direct_write_bytes`]);
//! [`Writer::run_direct`] runs such a write inline, reporting failures like a queued job.
//! Either way a file is complete (renamed into place) when [`Writer::flush`] returns.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, Receiver, Sender},
    },
    thread::JoinHandle,
};

use super::{Budget, BufferPool, ErrorLog, Tally, WriteFailure, budget::Admitted};
use crate::diag::EventSink;

/// A unit of background work: writes one file (or row) and reports its failure.
pub(crate) type Job = Box<dyn FnOnce() -> Result<(), WriteFailure> + Send>;

/// How the writer runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    /// Worker threads (0 means synchronous: every job runs inline in the producer).
    pub threads: usize,
    /// Most bytes queued or being written at once; producers wait beyond it (default 256 MiB).
    pub budget_bytes: usize,
    /// Borrowed tensors of at least this many bytes (or at least `budget_bytes`) are not
    /// copied and queued but written on the calling thread, straight from the caller's memory,
    /// before the Dumper call returns (default [`DEFAULT_DIRECT_WRITE_BYTES`], 8 MiB). The size
    /// is that of the tensor as handed over (a bf16 tensor widened to `<f4` counts its 2-byte
    /// elements). Bytes the Dumper had to copy anyway (a device tensor's host copy, a strided
    /// gather) are queued without a second copy whatever their size, unless they are at least
    /// `budget_bytes`. `0` writes every borrowed tensor directly; `usize::MAX` queues every
    /// tensor smaller than the budget. Without threads every write is inline.
    pub direct_write_bytes: usize,
    /// The nice value the worker threads lower themselves to (Linux; ignored elsewhere and
    /// when 0 or less): the runtime's threads then get the cores first and the writer takes
    /// what they leave, which on a machine with fewer cores than busy threads keeps file
    /// creation (most of a tensor dump's CPU time, in the file system) from slowing the
    /// dumped step. A producer that waits for budget sleeps, so the writer then runs. Default
    /// [`DEFAULT_WRITER_NICE`] (BENCHMARKS.md, "Digests on the writer threads").
    pub nice: i32,
}

/// The default [`WriterConfig::nice`].
pub const DEFAULT_WRITER_NICE: i32 = 10;

/// The default [`WriterConfig::direct_write_bytes`]: 8 MiB (see the module docs for why).
pub const DEFAULT_DIRECT_WRITE_BYTES: usize = 8 << 20;

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(2),
            budget_bytes: 256 << 20,
            direct_write_bytes: DEFAULT_DIRECT_WRITE_BYTES,
            nice: DEFAULT_WRITER_NICE,
        }
    }
}

impl WriterConfig {
    /// Synchronous writing: jobs run inline, nothing is queued.
    pub fn sync() -> Self {
        WriterConfig {
            threads: 0,
            ..Self::default()
        }
    }
}

/// Background write failures, as [`Error::Write`](crate::Error::Write) returns them.
#[derive(Debug)]
pub struct WriteErrors {
    /// How many writes failed since the last flush.
    pub count: u64,
    /// The first few failures in detail.
    pub failures: Vec<WriteFailure>,
}

impl std::fmt::Display for WriteErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} write(s) failed", self.count)?;
        for x in &self.failures {
            write!(f, "\n  {x}")?;
        }
        if self.count as usize > self.failures.len() {
            write!(
                f,
                "\n  ... and {} more",
                self.count as usize - self.failures.len()
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for WriteErrors {}

/// Runs write jobs on background threads with back-pressure.
///
/// [`submit`](Writer::submit) admits a job's byte cost against the budget (waiting while the
/// budget is full, so memory stays bounded and nothing is dropped), then queues it.
/// [`run_direct`](Writer::run_direct) runs a write on the caller's thread instead (for tensors
/// [`writes_direct`](Writer::writes_direct) says are too large to copy); it takes no budget,
/// since it holds no copy. Failures never panic the caller: they are counted, logged once, and
/// returned by [`flush`](Writer::flush). A panicking job is caught and reported as a failure.
#[derive(Debug)]
pub struct Writer {
    tx: Option<Sender<(Job, usize)>>,
    workers: Vec<JoinHandle<()>>,
    budget: Arc<Budget>,
    errors: Arc<ErrorLog>,
    written: Arc<Tally>,
    /// `min(direct_write_bytes, budget_bytes)`.
    direct_from: usize,
    queued: AtomicU64,
    inline: AtomicU64,
}

/// Lowers the calling thread's priority to nice value `nice` (never raises it; Linux only).
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: `gettid` has no preconditions; `getpriority`/`setpriority` with
        // `PRIO_PROCESS` and a thread id read and change only that thread's nice value (a
        // failure, e.g. a seccomp filter, leaves it as it was and is ignored: the priority is a
        // preference). A thread already nicer than `nice` (a niced process) is left alone.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            if libc::getpriority(libc::PRIO_PROCESS, tid) < nice {
                libc::setpriority(libc::PRIO_PROCESS, tid, nice);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

fn run_job(job: impl FnOnce() -> Result<(), WriteFailure>, errors: &ErrorLog) {
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(Ok(())) => {}
        Ok(Err(f)) => errors.record(f.path, f.error),
        Err(_) => errors.record(
            PathBuf::from("<writer job>"),
            std::io::Error::other("a write job panicked"),
        ),
    }
}

impl Writer {
    /// Starts the writer (and its threads, unless `cfg.threads == 0`); write failures are
    /// reported to stderr ([`EventSink::stderr`]).
    pub fn new(cfg: &WriterConfig) -> Self {
        Self::with_events(cfg, EventSink::default())
    }

    /// [`new`](Writer::new), reporting write failures to `events`.
    pub fn with_events(cfg: &WriterConfig, events: EventSink) -> Self {
        let budget = Arc::new(Budget::new(cfg.budget_bytes.max(1)));
        let errors = Arc::new(ErrorLog::with_events(events));
        let direct_from = cfg.direct_write_bytes.min(budget.limit());
        if cfg.threads == 0 {
            return Writer {
                tx: None,
                workers: Vec::new(),
                budget,
                errors,
                written: Arc::default(),
                direct_from,
                queued: AtomicU64::new(0),
                inline: AtomicU64::new(0),
            };
        }
        let (tx, rx) = mpsc::channel::<(Job, usize)>();
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..cfg.threads)
            .filter_map(|i| {
                let rx: Arc<Mutex<Receiver<(Job, usize)>>> = Arc::clone(&rx);
                let budget = Arc::clone(&budget);
                let errors = Arc::clone(&errors);
                let nice = cfg.nice;
                std::thread::Builder::new()
                    .name(format!("opdump-writer-{i}"))
                    .spawn(move || {
                        lower_priority(nice);
                        loop {
                            let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                            let Ok((job, cost)) = next else { break };
                            let _release = Admitted {
                                budget: &budget,
                                cost,
                            };
                            run_job(job, &errors);
                        }
                    })
                    .ok()
            })
            .collect::<Vec<_>>();
        // If no thread could be spawned, fall back to synchronous writing.
        let tx = (!workers.is_empty()).then_some(tx);
        Writer {
            tx,
            workers,
            budget,
            errors,
            written: Arc::default(),
            direct_from,
            queued: AtomicU64::new(0),
            inline: AtomicU64::new(0),
        }
    }

    /// `true` when jobs run inline.
    pub fn is_sync(&self) -> bool {
        self.tx.is_none()
    }

    /// The byte budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A pool of copy buffers whose idle buffers are charged to this writer's budget.
    pub fn pool(&self) -> BufferPool {
        BufferPool::new(Arc::clone(&self.budget))
    }

    /// Failures recorded so far.
    pub fn errors(&self) -> &ErrorLog {
        &self.errors
    }

    /// The failure log itself, for the parts of a Dumper that record their own failures in
    /// it (directories, statistic rows, metadata files).
    pub(crate) fn error_log(&self) -> Arc<ErrorLog> {
        Arc::clone(&self.errors)
    }

    /// Files complete on disk (counted by the jobs that wrote them, after the rename).
    pub fn written(&self) -> &Arc<Tally> {
        &self.written
    }

    /// Jobs handed to the writer threads so far.
    pub fn queued_jobs(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Jobs run on the caller's thread so far: direct writes, and every job of a synchronous
    /// writer.
    pub fn inline_jobs(&self) -> u64 {
        self.inline.load(Ordering::Relaxed)
    }

    /// `true` when a borrowed tensor of `bytes` bytes should be written on the calling thread
    /// with [`run_direct`](Writer::run_direct) rather than copied and
    /// [`submit`](Writer::submit)ted: always for a synchronous writer, otherwise from
    /// [`WriterConfig::direct_write_bytes`] or the whole budget, whichever is smaller, up.
    pub fn writes_direct(&self, bytes: usize) -> bool {
        self.is_sync() || bytes >= self.direct_from
    }

    /// Runs `write` now, on the calling thread, reporting its failure (or panic) like a
    /// queued job's. It takes no budget: it borrows the caller's bytes instead of holding a
    /// copy. The file is complete (renamed into place) when this returns.
    pub fn run_direct(&self, write: impl FnOnce() -> Result<(), WriteFailure>) {
        self.inline.fetch_add(1, Ordering::Relaxed);
        run_job(write, &self.errors);
    }

    /// Queues `job`, which holds about `cost` bytes, waiting while the budget is full.
    pub fn submit(&self, cost: usize, job: Job) {
        if self.tx.is_none() {
            return self.run_direct(job);
        }
        let cost = cost.max(1);
        self.budget.acquire(cost);
        self.submit_admitted(cost, job);
    }

    /// Queues `job`, whose `cost` the caller has already [`acquire`](Budget::acquire)d from
    /// [`budget`](Writer::budget) (so that a copy is made only once its memory is admitted);
    /// the writer releases it when the job is done. A synchronous writer runs the job inline
    /// and releases the cost at once.
    pub fn submit_admitted(&self, cost: usize, job: Job) {
        let cost = cost.max(1);
        match &self.tx {
            None => {
                self.run_direct(job);
                self.budget.release(cost);
            }
            Some(tx) => {
                match tx.send((job, cost)) {
                    Ok(()) => {
                        self.queued.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(mpsc::SendError((job, cost))) => {
                        // Workers are gone (they only stop on close): write inline.
                        let _release = Admitted {
                            budget: &self.budget,
                            cost,
                        };
                        self.run_direct(job);
                    }
                }
            }
        }
    }

    /// Waits for every queued job, then returns (and clears) the failures since the last flush.
    pub fn flush(&self) -> Result<(), WriteErrors> {
        self.budget.wait_idle();
        match self.errors.take() {
            (0, _) => Ok(()),
            (count, failures) => Err(WriteErrors { count, failures }),
        }
    }

    /// Flushes, stops the threads and returns the failures.
    pub fn close(&mut self) -> Result<(), WriteErrors> {
        let r = self.flush();
        self.tx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    /// The nice value of the calling thread.
    #[cfg(target_os = "linux")]
    fn my_nice() -> i32 {
        // SAFETY: as in `lower_priority`: reads this thread's nice value, nothing else.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn worker_threads_run_at_the_configured_nice_value() {
        let caller = my_nice();
        for nice in [0, 7] {
            let w = Writer::new(&WriterConfig {
                threads: 2,
                nice,
                ..WriterConfig::default()
            });
            let seen = Arc::new(Mutex::new(Vec::new()));
            for _ in 0..4 {
                let seen = Arc::clone(&seen);
                w.submit(
                    1,
                    Box::new(move || {
                        seen.lock().unwrap().push(my_nice());
                        Ok(())
                    }),
                );
            }
            w.flush().unwrap();
            let want = caller.max(nice);
            assert_eq!(*seen.lock().unwrap(), [want; 4], "nice {nice}");
        }
        assert_eq!(my_nice(), caller, "the caller's own priority is untouched");
    }

    #[test]
    fn memory_stays_within_budget_with_a_slow_sink() {
        let w = Writer::new(&WriterConfig {
            threads: 2,
            budget_bytes: 1000,
            direct_write_bytes: usize::MAX,
            ..WriterConfig::default()
        });
        let peak = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..40 {
            let done2 = Arc::clone(&done);
            w.submit(
                300,
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    done2.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }),
            );
            peak.fetch_max(w.budget().in_use(), Ordering::SeqCst);
        }
        w.flush().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 40, "nothing dropped");
        assert!(peak.load(Ordering::SeqCst) <= 1000, "budget respected");
    }

    #[test]
    fn failures_and_panics_are_reported_not_raised() {
        let mut w = Writer::new(&WriterConfig {
            threads: 1,
            budget_bytes: 1 << 20,
            ..WriterConfig::default()
        });
        w.submit(
            10,
            Box::new(|| {
                Err(WriteFailure {
                    path: "/nope/x.npy".into(),
                    error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                })
            }),
        );
        w.submit(10, Box::new(|| panic!("boom")));
        w.submit(10, Box::new(|| Ok(())));
        let e = w.flush().unwrap_err();
        assert_eq!(e.count, 2);
        assert!(e.to_string().contains("/nope/x.npy"));
        assert!(w.flush().is_ok(), "errors are returned once");
        assert!(w.close().is_ok());
    }

    /// Issue 13, defect 1: a failing diagnostic (then `eprintln!` on a full or closed stderr)
    /// panicked a writer thread between its job and the budget release, and `flush` waited
    /// forever. Now the event sink is contained and the budget released by a guard.
    #[test]
    fn a_panicking_event_sink_neither_kills_a_worker_nor_hangs_flush() {
        let mut w = Writer::with_events(
            &WriterConfig {
                threads: 2,
                budget_bytes: 100,
                ..WriterConfig::default()
            },
            EventSink::new(|_| panic!("stderr is gone")),
        );
        for i in 0..20 {
            w.submit(
                60,
                Box::new(move || {
                    Err(WriteFailure {
                        path: format!("/nope/{i}/x.npy").into(),
                        error: std::io::Error::from_raw_os_error(28),
                    })
                }),
            );
        }
        let e = w.flush().unwrap_err();
        assert_eq!(e.count, 20);
        assert_eq!(w.budget().in_use(), 0);
        assert_eq!(w.workers.len(), 2);
        assert!(w.close().is_ok());
    }

    #[test]
    fn sync_mode_runs_inline() {
        let w = Writer::new(&WriterConfig::sync());
        assert!(w.is_sync());
        let hit = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hit);
        w.submit(
            5,
            Box::new(move || {
                h.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        );
        assert_eq!(hit.load(Ordering::SeqCst), 1);
        assert!(
            w.writes_direct(0),
            "a synchronous writer writes everything inline"
        );
        assert_eq!((w.queued_jobs(), w.inline_jobs()), (0, 1));
        assert_eq!(w.budget().peak(), 0);
    }

    #[test]
    fn the_direct_threshold_is_the_config_or_the_budget_whichever_is_smaller() {
        let w = Writer::new(&WriterConfig {
            threads: 2,
            budget_bytes: 1000,
            direct_write_bytes: 100,
            ..WriterConfig::default()
        });
        assert!(!w.is_sync());
        assert!(!w.writes_direct(0));
        assert!(!w.writes_direct(99));
        assert!(w.writes_direct(100));
        let w = Writer::new(&WriterConfig {
            threads: 2,
            budget_bytes: 1000,
            direct_write_bytes: 5000,
            ..WriterConfig::default()
        });
        assert!(!w.writes_direct(999));
        assert!(
            w.writes_direct(1000),
            "a tensor the budget cannot hold is written directly"
        );
        let w = Writer::new(&WriterConfig {
            threads: 1,
            budget_bytes: 1000,
            direct_write_bytes: 0,
            ..WriterConfig::default()
        });
        assert!(w.writes_direct(0), "0: every tensor directly");
        assert_eq!(
            WriterConfig::default().direct_write_bytes,
            DEFAULT_DIRECT_WRITE_BYTES
        );
    }

    #[test]
    fn direct_writes_run_inline_without_budget_and_report_like_queued_ones() {
        let w = Writer::new(&WriterConfig {
            threads: 2,
            budget_bytes: 1 << 20,
            ..WriterConfig::default()
        });
        let caller = std::thread::current().id();
        let ran_on = Arc::new(Mutex::new(None));
        let r = Arc::clone(&ran_on);
        w.run_direct(move || {
            *r.lock().unwrap() = Some(std::thread::current().id());
            Ok(())
        });
        assert_eq!(
            *ran_on.lock().unwrap(),
            Some(caller),
            "ran on the caller's thread"
        );
        w.run_direct(|| {
            Err(WriteFailure {
                path: "/nope/direct.npy".into(),
                error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            })
        });
        w.run_direct(|| panic!("boom"));
        assert_eq!(w.budget().peak(), 0, "direct writes hold no budget");
        w.submit(10, Box::new(|| Ok(())));
        assert_eq!((w.queued_jobs(), w.inline_jobs()), (1, 3));
        let e = w.flush().unwrap_err();
        assert_eq!(e.count, 2);
        assert!(e.to_string().contains("/nope/direct.npy"));
        assert!(w.flush().is_ok());
    }
}
