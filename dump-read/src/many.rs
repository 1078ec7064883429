//! [`summarize_npy_many`]: many `.npy` files summarised together, their MD5s and MindSpore
//! SHA-1s hashed side by side in the lanes of multi-buffer engines, one pair per thread
//! (`opdump stats --all` over a directory).
//!
//! One MD5 stream is serial (about 0.7 GB/s on the project machine) and so is one SHA-1
//! stream (about 2 GB/s with SHA-NI), so a reader that hashes one file at a time is bound by
//! them whatever else it does. Here each worker thread keeps up to [`MD5_MAX_LANES`] files
//! open, one per lane of a [`Md5Multi`] and of a [`MsSha1Multi`] (MindSpore's `hash:sha1`, the
//! SHA-1s of every file's 20480-element slices in the lanes of a SHA-1 engine): in each round
//! it reads the next [`LANE_CHUNK`] bytes of every open file into that lane's buffer, computes
//! the statistics on the chunk while it is in cache, then hashes all lanes' chunks together
//! with each engine. A lane whose file ends takes the next file from the shared list, so a
//! large file never holds up the small ones. Memory stays bounded: one chunk buffer per lane
//! (and one for bf16 narrowing), 4 MiB per thread with 16 lanes. So do file descriptors: a
//! file that cannot be opened because the process is out of them (a low `ulimit -n`) waits
//! until a file is closed, and the worker keeps no more files open from then on than it had
//! when that happened (a worker holding none leaves the rest to the others); only a file that
//! cannot be opened while no worker holds a file fails.
//!
//! Digests and statistics are bit-identical to [`summarize_npy`] of each file (a hash is the
//! same function whichever lane computes it; the statistics see the same bytes in the same
//! order). A file named bf16 that turns out to hold values that are not bf16 is summarised
//! again on its own by [`summarize_npy`], which reports the stored f32 values with a warning.

use std::{
    path::PathBuf,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use dump_core::{
    DType,
    hash::{MD5_MAX_LANES, Md5Multi, MsSha1Multi},
    stats::FUSE_CHUNK,
};

use dump_stats::{Hashes, StreamStats};

use crate::{
    Error, FileSummary, TensorFile, par_map,
    stats::{Plan, done, narrow_bf16, summarize_npy},
};

/// Bytes read from each lane's file per round (the statistics' fused piece, so a chunk is
/// summarised in one piece while it is in cache).
pub const LANE_CHUNK: usize = FUSE_CHUNK;

/// Files per worker below which files are summarised one by one instead (each with its
/// digests on threads of its own, which beats a few busy lanes).
const MIN_FILES_PER_WORKER: usize = 4;

/// [`summarize_npy`] of every `(path, dtype the name gives)` of `files`, results in input
/// order, on up to `threads` threads (the caller's one included).
///
/// When `hashes` asks for a digest and there are at least 4 files per thread, each thread
/// hashes up to 16 files at once in the lanes of multi-buffer engines
/// ([`dump_core::hash::Md5Multi`], [`dump_core::hash::MsSha1Multi`]; 256 KiB of each lane's
/// file per round, statistics of the chunk while it is in cache); otherwise each file is
/// summarised on its own
/// ([`summarize_npy`], large files with their digests on threads of their own). Either way
/// the results are the same.
///
/// ```no_run
/// use std::path::PathBuf;
/// use dump_stats::Hashes;
///
/// let files: Vec<(PathBuf, Option<dump_core::DType>)> = std::fs::read_dir("dump/rank_0/Net/0/0")?
///     .map(|e| e.map(|e| (e.path(), None)))
///     .collect::<Result<_, _>>()?;
/// let both = Hashes { md5: true, sha1: true };
/// for (file, sum) in files.iter().zip(dump_read::summarize_npy_many(&files, both, 2)) {
///     match sum {
///         Ok(s) => println!("{}: md5 {:02x?}", file.0.display(), s.stats.md5),
///         Err(e) => eprintln!("{e}"),
///     }
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn summarize_npy_many(
    files: &[(PathBuf, Option<DType>)],
    hashes: Hashes,
    threads: usize,
) -> Vec<Result<FileSummary, Error>> {
    let threads = threads.max(1);
    let one_by_one = |idx: &[usize]| {
        par_map(
            idx.len(),
            threads,
            |k| summarize_npy(&files[idx[k]].0, files[idx[k]].1, hashes),
            &|_, _| {},
        )
    };
    let stopped = || Error::Format {
        path: PathBuf::new(),
        message: "internal error: a worker thread stopped".into(),
    };
    if hashes == Hashes::NONE || files.len() < MIN_FILES_PER_WORKER * threads {
        let all: Vec<usize> = (0..files.len()).collect();
        return one_by_one(&all)
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(stopped())))
            .collect();
    }
    let shared = Shared {
        next: AtomicUsize::new(0),
        retry: Mutex::new(Vec::new()),
        holding: AtomicUsize::new(0),
    };
    let parts = par_map(
        threads,
        threads,
        |_| Lanes::work(files, hashes, &shared),
        &|_, _| {},
    );
    let mut out: Vec<Option<Result<FileSummary, Error>>> = (0..files.len()).map(|_| None).collect();
    let mut redo = Vec::new();
    for (i, r) in parts.into_iter().flatten().flatten() {
        match r {
            Outcome::Done(s) => out[i] = Some(Ok(s)),
            Outcome::Failed(e) => out[i] = Some(Err(e)),
            Outcome::Redo => redo.push(i),
        }
    }
    // Files left waiting for a descriptor when the last worker holding files ended.
    redo.extend(
        shared
            .retry
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
    );
    for (i, r) in redo.iter().zip(one_by_one(&redo)) {
        out[*i] = r;
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(stopped())))
        .collect()
}

/// What the workers share: the next file of the list, the files waiting for a descriptor, and
/// how many files all workers hold open.
struct Shared {
    next: AtomicUsize,
    retry: Mutex<Vec<usize>>,
    holding: AtomicUsize,
}

/// How a file's pass through a lane ended.
enum Outcome {
    Done(FileSummary),
    Failed(Error),
    /// Named bf16 but holds f32 values that are not bf16: summarised again on its own.
    Redo,
}

/// A file in a lane.
struct Open {
    index: usize,
    npy: TensorFile,
    plan: Plan,
    acc: StreamStats,
    /// Data bytes not read yet.
    left: u64,
    /// Set when the file failed or must be redone: the lane's digest is dropped.
    end: Option<Outcome>,
}

/// One worker: its engine, its lanes' files and their chunk buffers.
struct Lanes<'f> {
    files: &'f [(PathBuf, Option<DType>)],
    /// Files this worker keeps open at most (lowered when the process runs out of file
    /// descriptors).
    cap: usize,
    shared: &'f Shared,
    open: Vec<Option<Open>>,
    bufs: Vec<Vec<u8>>,
    narrowed: Vec<Vec<u8>>,
    results: Vec<(usize, Outcome)>,
}

impl<'f> Lanes<'f> {
    /// Takes files from the shared list until none is left; returns each one's outcome by
    /// index.
    fn work(
        files: &'f [(PathBuf, Option<DType>)],
        hashes: Hashes,
        shared: &'f Shared,
    ) -> Vec<(usize, Outcome)> {
        let mut md5: Md5Multi<'static> = Md5Multi::new();
        let mut sha1: MsSha1Multi<'static> = MsSha1Multi::new();
        let lanes = md5.lanes().min(sha1.lanes()).min(MD5_MAX_LANES);
        let mut w = Lanes {
            files,
            cap: lanes,
            shared,
            open: (0..lanes).map(|_| None).collect(),
            bufs: (0..lanes).map(|_| Vec::new()).collect(),
            narrowed: (0..lanes).map(|_| Vec::new()).collect(),
            results: Vec::new(),
        };
        loop {
            for lane in 0..lanes {
                if w.open[lane].is_none() && w.open_count() < w.cap {
                    w.open[lane] = w.take();
                    if let Some(o) = &w.open[lane]
                        && hashes.sha1
                    {
                        sha1.start(lane, o.plan.stream, o.npy.elems());
                    }
                }
            }
            if w.open.iter().all(Option::is_none) {
                return w.results;
            }
            // Read and summarise the next chunk of every lane's file (statistics while the
            // chunk is in cache); the digests of all chunks follow, one engine run each.
            let fed: Vec<Option<(bool, usize)>> = (0..lanes).map(|lane| w.read(lane)).collect();
            let (Ok(mut md5_round), Ok(mut sha1_round)) = (md5.rebind(), sha1.rebind()) else {
                unreachable!("the previous round ran until no lane held input")
            };
            let mut ended = vec![false; lanes];
            for (lane, f) in fed.iter().enumerate() {
                let Some(o) = &w.open[lane] else { continue };
                if let Some((narrowed, n)) = *f {
                    let src = if narrowed {
                        &w.narrowed[lane]
                    } else {
                        &w.bufs[lane]
                    };
                    if hashes.md5 {
                        md5_round.update(lane, &src[..n]);
                    }
                    if hashes.sha1 {
                        sha1_round.update(lane, &src[..n]);
                    }
                }
                if o.left == 0 || o.end.is_some() {
                    ended[lane] = true;
                    if hashes.md5 {
                        md5_round.finish(lane);
                    }
                    if hashes.sha1 {
                        sha1_round.finish(lane);
                    }
                }
            }
            while md5_round.run() != 0 {}
            sha1_round.run();
            for lane in (0..lanes).filter(|&l| ended[l]) {
                // Both engines ran until no lane held input, so an ended lane holds its digests.
                let md5 = md5_round.digest(lane);
                let sha1 = sha1_round.digest(lane);
                if let Some(mut o) = w.open[lane].take() {
                    let index = o.index;
                    let outcome = match o.end.take() {
                        Some(end) => {
                            drop(o);
                            end
                        }
                        None => finish(o, md5, sha1),
                    };
                    // The file is closed now: another worker may open one in its place.
                    shared.holding.fetch_sub(1, Ordering::SeqCst);
                    w.results.push((index, outcome));
                }
            }
            let (Ok(m), Ok(s)) = (md5_round.rebind(), sha1_round.rebind()) else {
                unreachable!("both engines ran until no lane held input")
            };
            (md5, sha1) = (m, s);
        }
    }

    /// Files open in this worker's lanes.
    fn open_count(&self) -> usize {
        self.open.iter().flatten().count()
    }

    /// The next file that opens (a file that does not gets its error as its outcome). `None`
    /// when no file is left, or when the process is out of file descriptors while some worker
    /// holds files open: the file waits in the shared list for a later `take`, and this
    /// worker's cap is lowered to what it holds.
    fn take(&mut self) -> Option<Open> {
        loop {
            let waiting = self
                .shared
                .retry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let index = match waiting {
                Some(i) => i,
                None => self.shared.next.fetch_add(1, Ordering::Relaxed),
            };
            let (path, named) = self.files.get(index)?;
            let open = || {
                TensorFile::open(path).and_then(|npy| {
                    let plan = Plan::of(&npy, *named);
                    // Both digests come from the lanes' engines.
                    let acc =
                        StreamStats::new(plan.stream, npy.elems(), Hashes::NONE).map_err(|e| {
                            Error::format(
                                path,
                                format!("cannot compute statistics of {} data: {e}", plan.stream),
                            )
                        })?;
                    Ok(Open {
                        index,
                        left: npy.data_len,
                        npy,
                        plan,
                        acc,
                        end: None,
                    })
                })
            };
            // Counted as held from before the open, so that another worker that runs out of
            // descriptors meanwhile knows a file is about to be closed.
            let holding = &self.shared.holding;
            holding.fetch_add(1, Ordering::SeqCst);
            let mut opened = open();
            // Out of descriptors with no other file held counted: the files held when the open
            // failed may have been closed since (a few tries, between other workers' turns).
            for _ in 0..3 {
                match &opened {
                    Err(e) if e.out_of_descriptors() && holding.load(Ordering::SeqCst) == 1 => {
                        std::thread::yield_now();
                        opened = open();
                    }
                    _ => break,
                }
            }
            match opened {
                Ok(o) => return Some(o),
                Err(e) if e.out_of_descriptors() && holding.load(Ordering::SeqCst) > 1 => {
                    holding.fetch_sub(1, Ordering::SeqCst);
                    self.shared
                        .retry
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(index);
                    self.cap = self.open_count();
                    return None;
                }
                Err(e) => {
                    holding.fetch_sub(1, Ordering::SeqCst);
                    self.results.push((index, Outcome::Failed(e)));
                }
            }
        }
    }

    /// Reads and summarises the next chunk of `lane`'s file; `Some((narrowed, len))` names
    /// the bytes to hash. A failure ends the file (`Open::end`).
    fn read(&mut self, lane: usize) -> Option<(bool, usize)> {
        let o = self.open[lane].as_mut()?;
        if o.left == 0 || o.end.is_some() {
            return None;
        }
        let n = (o.left as usize).min(LANE_CHUNK);
        let buf = &mut self.bufs[lane];
        buf.resize(n, 0);
        if let Err(e) = o.npy.read_chunk(buf) {
            o.end = Some(Outcome::Failed(e));
            return None;
        }
        o.left -= n as u64;
        let narrowed = &mut self.narrowed[lane];
        let bytes = if o.plan.narrow {
            narrowed.clear();
            if !narrow_bf16(buf, narrowed) {
                o.end = Some(Outcome::Redo);
                return None;
            }
            &narrowed[..]
        } else {
            &buf[..]
        };
        if let Err(e) = o.acc.update(bytes) {
            let path = o.npy.path();
            let msg = format!("cannot compute statistics of {} data: {e}", o.plan.stream);
            o.end = Some(Outcome::Failed(Error::format(path, msg)));
            return None;
        }
        Some((o.plan.narrow, bytes.len()))
    }
}

/// A file whose every byte was read: its summary with the lane's digests.
fn finish(o: Open, md5: Option<[u8; 16]>, sha1: Option<[u8; 20]>) -> Outcome {
    let path = o.npy.path().to_path_buf();
    match o.acc.finish() {
        Ok(mut stats) => {
            stats.md5 = md5;
            stats.sha1 = sha1;
            Outcome::Done(done(o.npy, o.plan.report, stats, o.plan.warning))
        }
        Err(e) => Outcome::Failed(Error::format(
            &path,
            format!("cannot compute statistics of {} data: {e}", o.plan.stream),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn write(dir: &Path, name: &str, dtype: DType, elems: usize, data: &[u8]) -> PathBuf {
        let p = dir.join(name);
        dump_npy::write_file(&p, dtype, &[elems], data, Default::default()).unwrap();
        p
    }

    /// A set of files that exercises every path of a lane: sizes from empty to several
    /// chunks (lanes finish in different rounds and take new files), dtypes, bf16 widened to
    /// `<f4` (exact, and not exact: summarised again), a name that disagrees with the data,
    /// and hostile files (missing, not an npy, truncated data).
    fn file_set(dir: &Path) -> Vec<(PathBuf, Option<DType>)> {
        std::fs::create_dir_all(dir).unwrap();
        let mut files = Vec::new();
        let sizes = [
            0usize,
            1,
            3,
            1000,
            16_384,
            LANE_CHUNK / 4,
            LANE_CHUNK / 4 + 7,
            3 * LANE_CHUNK / 4 + 1,
        ];
        for (i, &elems) in sizes.iter().cycle().take(37).enumerate() {
            let elems = elems + i % 5;
            let mut data = bytes(i as u64 + 1, elems * 4);
            // Finite values (and some NaN bit patterns left in on purpose every 7th file).
            if i % 7 != 0 {
                for c in data.chunks_exact_mut(4) {
                    c[3] &= 0x3f;
                }
            }
            files.push((
                write(dir, &format!("f{i}.npy"), DType::Float32, elems, &data),
                None,
            ));
        }
        let i8s = bytes(99, 70_001);
        files.push((write(dir, "i8.npy", DType::Int8, i8s.len(), &i8s), None));
        let f16 = bytes(98, 2 * 40_000);
        files.push((
            write(dir, "h.npy", DType::Float16, 40_000, &f16),
            Some(DType::Float16),
        ));
        // bf16 widened to <f4: low 16 bits zero (exact), and one with a value that is not.
        let bf: Vec<u8> = bytes(97, 2 * 300_000)
            .chunks_exact(2)
            .flat_map(|b| [0, 0, b[0], b[1] & 0x7f])
            .collect();
        files.push((
            write(dir, "bf.npy", DType::Float32, 300_000, &bf),
            Some(DType::BFloat16),
        ));
        let mut not_bf = bf.clone();
        not_bf[4 * 290_000] = 1;
        files.push((
            write(dir, "notbf.npy", DType::Float32, 300_000, &not_bf),
            Some(DType::BFloat16),
        ));
        files.push((
            write(dir, "named.npy", DType::Int8, 10, &i8s[..10]),
            Some(DType::Float32),
        ));
        files.push((dir.join("missing.npy"), None));
        std::fs::write(dir.join("text.npy"), b"not an npy file at all").unwrap();
        files.push((dir.join("text.npy"), None));
        let good = std::fs::read(&files[6].0).unwrap();
        std::fs::write(dir.join("cut.npy"), &good[..good.len() - 5]).unwrap();
        files.push((dir.join("cut.npy"), None));
        files
    }

    /// Every file's summary (statistics, MD5, SHA-1, dtype, warning) or error is what
    /// `summarize_npy` gives for it alone, whatever the thread count, digests or order.
    #[test]
    fn same_as_one_file_at_a_time() {
        let dir = std::env::temp_dir().join(format!("opdump-many-{}", std::process::id()));
        let files = file_set(&dir);
        let md5_only = Hashes {
            md5: true,
            sha1: false,
        };
        let sha1_only = Hashes {
            md5: false,
            sha1: true,
        };
        let both = Hashes {
            md5: true,
            sha1: true,
        };
        for hashes in [both, md5_only, sha1_only, Hashes::NONE] {
            let want: Vec<String> = files
                .iter()
                .map(|(p, n)| match summarize_npy(p, *n, hashes) {
                    Ok(s) => format!("{s:?}"),
                    Err(e) => e.to_string(),
                })
                .collect();
            for threads in [1, 2] {
                let got = summarize_npy_many(&files, hashes, threads);
                assert_eq!(got.len(), files.len());
                for ((g, w), f) in got.iter().zip(&want).zip(&files) {
                    let g = match g {
                        Ok(s) => format!("{s:?}"),
                        Err(e) => e.to_string(),
                    };
                    assert_eq!(&g, w, "{} ({threads} threads)", f.0.display());
                }
            }
        }
        // The lanes were used (enough files per thread) and the digests are real ones.
        assert!(files.len() >= MIN_FILES_PER_WORKER * 2);
        let got = summarize_npy_many(&files, both, 2);
        let data = std::fs::read(&files[7].0).unwrap();
        let s = got[7].as_ref().unwrap();
        assert_eq!(
            s.stats.md5,
            Some(dump_core::hash::md5(&data[data.len() - 4 * s.shape[0]..]))
        );
        assert!(
            got[files.len() - 3]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("missing.npy")
        );
        let w = got[files.len() - 5].as_ref().unwrap();
        assert!(w.warning.as_deref().unwrap_or("").contains("not bfloat16"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_files() {
        assert!(summarize_npy_many(&[], Hashes::NONE, 4).is_empty());
    }
}
