//! The background writer: worker threads fed through a byte-bounded queue.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        mpsc::{self, Receiver, Sender},
    },
    thread::JoinHandle,
};

use super::{Budget, ErrorLog, WriteFailure};

/// A unit of background work: writes one file (or row) and reports its failure.
pub type Job = Box<dyn FnOnce() -> Result<(), WriteFailure> + Send>;

/// How the writer runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    /// Worker threads (0 means synchronous: every job runs inline in the producer).
    pub threads: usize,
    /// Most bytes queued or being written at once; producers wait beyond it (default 256 MiB).
    pub budget_bytes: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(2),
            budget_bytes: 256 << 20,
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

/// Failures returned by [`Writer::flush`].
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
/// budget is full, so memory stays bounded and nothing is dropped), then queues it. Failures
/// never panic the caller: they are counted, logged once, and returned by
/// [`flush`](Writer::flush). A panicking job is caught and reported as a failure.
#[derive(Debug)]
pub struct Writer {
    tx: Option<Sender<(Job, usize)>>,
    workers: Vec<JoinHandle<()>>,
    budget: Arc<Budget>,
    errors: Arc<ErrorLog>,
}

fn run_job(job: Job, errors: &ErrorLog) {
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
    /// Starts the writer (and its threads, unless `cfg.threads == 0`).
    pub fn new(cfg: &WriterConfig) -> Self {
        let budget = Arc::new(Budget::new(cfg.budget_bytes.max(1)));
        let errors = Arc::new(ErrorLog::new());
        if cfg.threads == 0 {
            return Writer {
                tx: None,
                workers: Vec::new(),
                budget,
                errors,
            };
        }
        let (tx, rx) = mpsc::channel::<(Job, usize)>();
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..cfg.threads)
            .filter_map(|i| {
                let rx: Arc<Mutex<Receiver<(Job, usize)>>> = Arc::clone(&rx);
                let budget = Arc::clone(&budget);
                let errors = Arc::clone(&errors);
                std::thread::Builder::new()
                    .name(format!("opdump-writer-{i}"))
                    .spawn(move || {
                        loop {
                            let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                            let Ok((job, cost)) = next else { break };
                            run_job(job, &errors);
                            budget.release(cost);
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

    /// Failures recorded so far.
    pub fn errors(&self) -> &ErrorLog {
        &self.errors
    }

    /// Queues `job`, which holds about `cost` bytes, waiting while the budget is full.
    pub fn submit(&self, cost: usize, job: Job) {
        let cost = cost.max(1);
        match &self.tx {
            None => run_job(job, &self.errors),
            Some(tx) => {
                self.budget.acquire(cost);
                if let Err(mpsc::SendError((job, cost))) = tx.send((job, cost)) {
                    // Workers are gone (they only stop on close): write inline.
                    run_job(job, &self.errors);
                    self.budget.release(cost);
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

    #[test]
    fn memory_stays_within_budget_with_a_slow_sink() {
        let w = Writer::new(&WriterConfig {
            threads: 2,
            budget_bytes: 1000,
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
    }
}
