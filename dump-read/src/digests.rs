//! [`DigestThreads`]: MD5 and MindSpore's SHA-1 of a streamed tensor, each on a thread of its
//! own, while the reading thread computes the statistics.
//!
//! One MD5 stream is serial (about 0.8 GB/s on the project machine) and so is one SHA-1
//! stream; computed one after the other with the statistics on one thread they bound a
//! hashed `opdump stats` of a large file to ≈ 0.5 GB/s. On their own threads the three run
//! side by side and the slowest one (MD5) sets the pace.
//!
//! Memory stays bounded: the chunks are copied into at most [`BUFFERS`] reused buffers, and
//! the reader waits for a free one when the digests fall behind. A thread that cannot be
//! started makes [`DigestThreads::spawn`] return `None`, and the caller hashes inline.

use std::{
    sync::{Arc, mpsc},
    thread::JoinHandle,
};

use dump_core::{
    DType,
    hash::{Md5Stream, MsSha1},
};
use dump_stats::Hashes;

/// Buffers in flight at most (each one chunk of the reader, [`dump_npy::CHUNK`] bytes).
pub(crate) const BUFFERS: usize = 4;

/// One chunk shared by the digest threads; the last one to drop it hands the buffer back.
struct Chunk {
    data: Vec<u8>,
    back: mpsc::Sender<Vec<u8>>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // The reader may be gone already (an error ended the file): the buffer is then freed.
        let _ = self.back.send(std::mem::take(&mut self.data));
    }
}

/// A digest in progress.
enum Digest {
    Md5(Md5Stream),
    Sha1(MsSha1),
}

impl Digest {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Digest::Md5(m) => m.update(bytes),
            Digest::Sha1(s) => s.update(bytes),
        }
    }
}

/// The finished digests: (MD5, MindSpore SHA-1), each `Some` when asked for.
pub(crate) type Digests = (Option<[u8; 16]>, Option<[u8; 20]>);

/// The digests of one tensor, computed on their own threads (see the [module docs](self)).
pub(crate) struct DigestThreads {
    workers: Vec<(mpsc::SyncSender<Arc<Chunk>>, JoinHandle<Digest>)>,
    free: mpsc::Receiver<Vec<u8>>,
    back: mpsc::Sender<Vec<u8>>,
    made: usize,
}

impl DigestThreads {
    /// One thread per digest `hashes` asks for, for a tensor of `elems` elements of `dtype`.
    /// `None` when no digest is asked for or a thread cannot be started.
    pub(crate) fn spawn(dtype: DType, elems: usize, hashes: Hashes) -> Option<DigestThreads> {
        let mut jobs = Vec::new();
        if hashes.md5 {
            jobs.push(Digest::Md5(Md5Stream::new()));
        }
        if hashes.sha1 {
            jobs.push(Digest::Sha1(MsSha1::new(dtype, elems)));
        }
        if jobs.is_empty() {
            return None;
        }
        let (back, free) = mpsc::channel();
        let mut workers = Vec::with_capacity(jobs.len());
        for mut job in jobs {
            let (tx, rx) = mpsc::sync_channel::<Arc<Chunk>>(BUFFERS);
            // On failure the threads already started see their channel close and end.
            let handle = std::thread::Builder::new()
                .name("opdump-digest".into())
                .spawn(move || {
                    for chunk in rx {
                        job.update(&chunk.data);
                    }
                    job
                })
                .ok()?;
            workers.push((tx, handle));
        }
        Some(DigestThreads {
            workers,
            free,
            back,
            made: 0,
        })
    }

    /// Hands the next bytes of the tensor to every digest thread (copied into a reused
    /// buffer; waits for one when [`BUFFERS`] are in flight). `false` when a thread has
    /// stopped.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> bool {
        let mut buf = match self.free.try_recv() {
            Ok(b) => b,
            Err(_) if self.made < BUFFERS => {
                self.made += 1;
                Vec::with_capacity(bytes.len())
            }
            // `self.back` keeps the channel open, so this waits for a chunk to be dropped.
            Err(_) => match self.free.recv() {
                Ok(b) => b,
                Err(_) => return false,
            },
        };
        buf.clear();
        buf.extend_from_slice(bytes);
        let chunk = Arc::new(Chunk {
            data: buf,
            back: self.back.clone(),
        });
        self.workers
            .iter()
            .all(|(tx, _)| tx.send(Arc::clone(&chunk)).is_ok())
    }

    /// Waits for the threads; `None` when a thread failed.
    pub(crate) fn finish(self) -> Option<Digests> {
        let (mut md5, mut sha1) = (None, None);
        for (tx, handle) in self.workers {
            drop(tx);
            match handle.join().ok()? {
                Digest::Md5(m) => md5 = Some(m.finish()),
                Digest::Sha1(s) => sha1 = Some(s.finish()),
            }
        }
        Some((md5, sha1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_digests_as_inline_for_any_cut_and_more_chunks_than_buffers() {
        let elems = 50_000usize; // over 20480: MindSpore's sliced SHA-1 scheme
        let data: Vec<u8> = (0..elems as u32)
            .flat_map(|i| (i.wrapping_mul(2_654_435_761) as f32).to_le_bytes())
            .collect();
        let both = Hashes {
            md5: true,
            sha1: true,
        };
        let mut t = DigestThreads::spawn(DType::Float32, elems, both).unwrap();
        for c in data.chunks(3001) {
            // 67 chunks through 4 buffers: buffers are reused and the reader waits
            assert!(t.feed(c));
        }
        let (md5, sha1) = t.finish().unwrap();
        assert_eq!(md5, Some(dump_core::hash::md5(&data)));
        assert_eq!(
            sha1,
            Some(dump_core::hash::ms_sha1(DType::Float32, &data, elems))
        );
    }

    #[test]
    fn only_what_is_asked_and_none_for_no_digest() {
        assert!(DigestThreads::spawn(DType::Int8, 3, Hashes::NONE).is_none());
        let mut t = DigestThreads::spawn(
            DType::Int8,
            3,
            Hashes {
                md5: false,
                sha1: true,
            },
        )
        .unwrap();
        assert!(t.feed(&[1, 2, 3]));
        let (md5, sha1) = t.finish().unwrap();
        assert_eq!(md5, None);
        assert_eq!(
            sha1,
            Some(dump_core::hash::ms_sha1(DType::Int8, &[1, 2, 3], 3))
        );
    }

    #[test]
    fn dropping_midway_ends_the_threads() {
        let mut t = DigestThreads::spawn(
            DType::UInt8,
            10,
            Hashes {
                md5: true,
                sha1: true,
            },
        )
        .unwrap();
        assert!(t.feed(&[0; 5]));
        drop(t); // an error ended the file: nothing waits, the threads drain and stop
    }
}
