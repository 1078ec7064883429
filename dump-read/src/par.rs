//! The one parallel map of the read side: `inspect`, `compare` and `opdump stats` hand it
//! their items (tensors, pairs, files).

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f(0)`, …, `f(n - 1)` on up to `threads` threads (the caller's thread is one of them),
/// results in index order. Items are taken one at a time from a shared counter, so a slow
/// item never holds up the others. `progress(done, n)` is called after each item, from the
/// thread that did it. A spawned worker that panics loses only the items it had taken (their
/// slots are `None`); a panic on the caller's own thread propagates. Where no thread can be
/// started, the caller's thread does everything.
///
/// Every item of the read side opens files (a pair opens two), so the threads are also held
/// to the file descriptors the process has left: at most one thread per three descriptors
/// below the soft `RLIMIT_NOFILE`, at least one. Under a low `ulimit -n` the work then runs on
/// fewer threads instead of failing files with "Too many open files".
///
/// ```
/// let squares = dump_read::par_map(5, 3, |i| i * i, &|_, _| {});
/// assert_eq!(squares, [Some(0), Some(1), Some(4), Some(9), Some(16)]);
/// ```
pub fn par_map<T: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> T + Sync,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Option<T>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let work = || {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            out.push((i, f(i)));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, n);
        }
        out
    };
    let threads = threads.min(fd_headroom().map_or(usize::MAX, |h| (h / FDS_PER_THREAD).max(1)));
    let parts: Vec<Vec<(usize, T)>> = std::thread::scope(|s| {
        let spawned: Vec<_> = (1..threads.clamp(1, n.max(1)))
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(s, work).ok())
            .collect();
        let mut parts = vec![work()];
        parts.extend(spawned.into_iter().filter_map(|h| h.join().ok()));
        parts
    });
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for (i, r) in parts.into_iter().flatten() {
        slots[i] = Some(r);
    }
    slots
}

/// File descriptors one worker may hold at once: a pair's two files, or a file and the
/// output it is converted into, and one spare.
const FDS_PER_THREAD: usize = 3;

/// File descriptors this process can still open: the soft `RLIMIT_NOFILE` less the
/// descriptors open now (counted in `/proc/self/fd`). `None` where either is unknown (no
/// `/proc`, an unlimited soft limit).
fn fd_headroom() -> Option<usize> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` writes one `rlimit` through a pointer to a live, writable one.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
            || lim.rlim_cur == libc::RLIM_INFINITY
        {
            return None;
        }
        // The directory's own descriptor is listed too while it is read.
        let open = std::fs::read_dir("/proc/self/fd")
            .ok()?
            .count()
            .saturating_sub(1);
        Some(
            usize::try_from(lim.rlim_cur)
                .unwrap_or(usize::MAX)
                .saturating_sub(open),
        )
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn headroom_is_the_limit_less_the_open_descriptors() {
        // Other test threads open and close files meanwhile: one of a few tries must see the
        // 5 descriptors opened in between.
        let mut seen = Vec::new();
        for _ in 0..5 {
            let before = fd_headroom().expect("a finite soft limit and /proc");
            let files: Vec<std::fs::File> = (0..5)
                .map(|_| std::fs::File::open("/proc/self/status").unwrap())
                .collect();
            let after = fd_headroom().unwrap();
            drop(files);
            if after + 5 == before {
                return;
            }
            seen.push((before, after));
        }
        panic!("headroom before and after opening 5 files: {seen:?}");
    }

    #[test]
    fn every_item_once_in_order_whatever_the_thread_count() {
        for threads in [0, 1, 2, 7, 64] {
            let calls = AtomicUsize::new(0);
            let seen = std::sync::Mutex::new(0usize);
            let out = par_map(
                50,
                threads,
                |i| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    i * 3
                },
                &|d, n| {
                    assert_eq!(n, 50);
                    let mut s = seen.lock().unwrap();
                    *s = (*s).max(d);
                },
            );
            assert_eq!(calls.load(Ordering::Relaxed), 50);
            assert_eq!(*seen.lock().unwrap(), 50);
            assert_eq!(out, (0..50).map(|i| Some(i * 3)).collect::<Vec<_>>());
        }
        assert!(par_map(0, 4, |i| i, &|_, _| {}).is_empty());
    }
}
