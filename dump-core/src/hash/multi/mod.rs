//! Multi-buffer MD5 and SHA-1: independent messages hashed side by side in the lanes of SIMD
//! registers.
//!
//! One MD5 or SHA-1 stream is a chain of dependent 32-bit operations (MD5 about 5 cycles per
//! byte; SHA-1 about 1.5 with SHA-NI); the kernels here run the same chain for 16 messages in
//! the `u32` lanes of vector registers (AVX2, or AVX-512 with one-instruction round functions
//! and rotations), so a dump step's tensors, or a directory's files, hash together in a
//! fraction of the time (BENCHMARKS.md). Every digest is bit-identical to
//! [`md5`](super::md5()) or one-stream SHA-1 of the same bytes.
//!
//! - [`md5_many`] and [`sha1_many`]: one call for a set of messages of any lengths.
//! - [`Multi`] ([`Md5Multi`], [`Sha1Multi`]): the streaming engine underneath: each lane
//!   carries its own message, fed chunk by chunk and finished independently; [`Multi::run`]
//!   hashes until some lane needs input or holds a digest, so a scheduler refills lanes that
//!   finish early.
//! - [`MultiBackend`] (also named [`Md5Backend`]): which kernel runs; chosen at run time with
//!   the `std` feature (AVX-512F + VL, else AVX2, else portable), from the build's target
//!   features without it.
//!
//! ```
//! use dump_core::hash::{md5, md5_many, sha1_many};
//!
//! let msgs: [&[u8]; 3] = [b"", b"abc", &[7u8; 1000]];
//! let mut out = [[0u8; 16]; 3];
//! md5_many(&msgs, &mut out).unwrap();
//! for (m, d) in msgs.iter().zip(&out) {
//!     assert_eq!(*d, md5(m));
//! }
//! let mut sha = [[0u8; 20]; 3];
//! sha1_many(&msgs, &mut sha).unwrap();
//! assert_eq!(
//!     dump_core::hash::hex(&sha[1]).as_str(),
//!     "a9993e364706816aba3e25717850c26c9cd0d89d"
//! );
//! ```
//!
//! Design: lane states are kept as structure-of-arrays (rows of [`MD5_MAX_LANES`] words, four
//! for MD5, five for SHA-1); a kernel call compresses the same number of 64-byte blocks in
//! every lane that has input (the smallest run of whole blocks any such lane holds), loading
//! each lane's block and transposing words into lanes in registers. A lane's partial block,
//! and its final padding, wait in a 128-byte buffer of the lane, so padding is hashed by the
//! vector kernel too. When few lanes have input (a large tensor left alone), they are hashed
//! as scalar streams instead (SHA-1 then uses SHA-NI where the CPU has it), which is faster
//! than a few busy lanes of a vector kernel, so multi-buffer never runs much slower than one
//! stream per message. [`md5_many`] and [`sha1_many`] start the longest messages first
//! (sorted in batches of 1024), so the last messages to finish are short ones and few lanes
//! idle at the end.

mod algo;
mod md5_portable;
mod md5_steps;
#[cfg(target_arch = "x86_64")]
mod md5_x86;
mod sha1_portable;
mod sha1_rounds;
#[cfg(target_arch = "x86_64")]
mod sha1_x86;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod transpose;

use core::marker::PhantomData;

use crate::Error;

pub use algo::{LaneHash, Md5, Sha1};

/// Most lanes any backend uses (AVX2 and AVX-512: 16), for MD5 and SHA-1 alike.
pub const MD5_MAX_LANES: usize = 16;

/// Messages [`md5_many`] sorts by length at a time (longest first); a stack array of `u16`
/// offsets (2 KiB). A dump step's tensors fit in one batch: a batch boundary puts long
/// messages after short ones, which leaves lanes idle at the end (simulated on the benchmark
/// set: 85% lane use with 16 lanes and batches of 128, 100% in one batch).
const BATCH: usize = 1024;

/// Lane states, structure-of-arrays: `st[0][lane]` is the lane's first state word, and so on
/// (MD5 uses rows 0..4, SHA-1 rows 0..5).
type State = [[u32; MD5_MAX_LANES]; 5];

/// Which kernel hashes the lanes of a [`Multi`] engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MultiBackend {
    /// Plain Rust, 4 lanes as arrays of `u32` (the compiler vectorises what the target allows).
    Portable,
    /// x86-64 AVX2: 16 lanes in two interleaved `ymm` registers.
    Avx2,
    /// x86-64 AVX-512F + AVX-512VL: 16 lanes, round functions in one `vpternlogd` and
    /// rotations in one `vprold` (MD5 in two interleaved `ymm` registers, SHA-1 in one `zmm`
    /// register; the x86 kernel modules say why).
    Avx512,
}

/// The backend enum under its first name (multi-buffer MD5 came first).
pub type Md5Backend = MultiBackend;

impl MultiBackend {
    /// The fastest backend this CPU supports: detected at run time with the `std` feature,
    /// from the compile-time target features without it.
    pub fn detect() -> MultiBackend {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
            {
                return MultiBackend::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") {
                return MultiBackend::Avx2;
            }
        }
        #[cfg(all(
            not(feature = "std"),
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "avx512f",
            target_feature = "avx512vl"
        ))]
        {
            return MultiBackend::Avx512;
        }
        #[cfg(all(
            not(feature = "std"),
            target_arch = "x86_64",
            target_feature = "avx2",
            not(all(target_feature = "avx512f", target_feature = "avx512vl"))
        ))]
        {
            return MultiBackend::Avx2;
        }
        #[allow(unreachable_code)]
        MultiBackend::Portable
    }

    /// `true` if this backend can run on this CPU.
    pub fn available(self) -> bool {
        match self {
            MultiBackend::Portable => true,
            MultiBackend::Avx2 => MultiBackend::detect() != MultiBackend::Portable,
            MultiBackend::Avx512 => MultiBackend::detect() == MultiBackend::Avx512,
        }
    }

    /// Messages hashed side by side.
    pub const fn lanes(self) -> usize {
        match self {
            MultiBackend::Portable => PORTABLE_LANES,
            MultiBackend::Avx2 | MultiBackend::Avx512 => 16,
        }
    }

    /// Short name for reports (`portable`, `avx2`, `avx512`).
    pub const fn name(self) -> &'static str {
        match self {
            MultiBackend::Portable => "portable",
            MultiBackend::Avx2 => "avx2",
            MultiBackend::Avx512 => "avx512",
        }
    }
}

/// Lanes of both portable kernels.
const PORTABLE_LANES: usize = 4;
const _: () =
    assert!(md5_portable::LANES == PORTABLE_LANES && sha1_portable::LANES == PORTABLE_LANES);

/// Where a lane's message stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No message: the next `update` or `finish` starts one.
    Free,
    /// A message is being fed.
    Open,
    /// `finish` was called; the padding follows once the pending input is hashed.
    Closing,
    /// The padding is queued in the lane buffer.
    Padded,
    /// The digest is in the lane state, waiting for [`Multi::digest`].
    Done,
}

/// One lane: its pending input and its partial block.
#[derive(Clone, Copy)]
struct Lane<'a> {
    phase: Phase,
    /// Caller bytes not hashed yet, consumed from the front in whole blocks. Never shorter
    /// than a block unless empty (shorter rests move to `buf`); while it is non-empty,
    /// `carry` is 0.
    ext: &'a [u8],
    /// `buf[..carry]`: the message's partial block; or, while `pending > 0`, whole blocks
    /// (a completed partial block, or the padding) starting at block `first`.
    buf: [u8; 128],
    carry: u8,
    pending: u8,
    first: u8,
    /// Message bytes fed so far.
    len: u64,
}

impl Lane<'_> {
    const FREE: Lane<'static> = Lane {
        phase: Phase::Free,
        ext: &[],
        buf: [0; 128],
        carry: 0,
        pending: 0,
        first: 0,
        len: 0,
    };

    /// Input is waiting for the kernel.
    fn busy(&self) -> bool {
        self.pending > 0 || !self.ext.is_empty()
    }

    /// The next run of whole blocks to hash (non-empty while `busy`).
    fn source(&self) -> &[u8] {
        if self.pending > 0 {
            let start = 64 * usize::from(self.first);
            &self.buf[start..start + 64 * usize::from(self.pending)]
        } else {
            &self.ext[..self.ext.len() / 64 * 64]
        }
    }

    /// Marks `n` blocks of [`source`](Lane::source) as hashed.
    fn consume(&mut self, n: usize) {
        if self.pending > 0 {
            // `n` is at most this lane's source length in blocks, so `pending` (<= 2) bounds it.
            let n = n as u8;
            self.pending -= n;
            self.first += n;
        } else {
            self.ext = &self.ext[64 * n..];
        }
    }

    /// Moves a short rest of `ext` into the partial block and, once nothing is pending,
    /// queues the padding of a closing message (length field big-endian for SHA-1) or marks a
    /// padded one done.
    fn settle(&mut self, big_endian: bool) {
        if self.pending > 0 || self.ext.len() >= 64 {
            return;
        }
        if !self.ext.is_empty() {
            // `ext` non-empty means `carry == 0` (see `ext`), and it is shorter than a block.
            let n = self.ext.len();
            self.buf[..n].copy_from_slice(self.ext);
            self.carry = n as u8;
            self.ext = &[];
        }
        match self.phase {
            Phase::Closing => {
                let carry = usize::from(self.carry);
                let blocks = if carry < 56 { 1 } else { 2 };
                let end = 64 * blocks;
                self.buf[carry] = 0x80;
                self.buf[carry + 1..end - 8].fill(0);
                let bits = self.len.wrapping_mul(8);
                self.buf[end - 8..end].copy_from_slice(&if big_endian {
                    bits.to_be_bytes()
                } else {
                    bits.to_le_bytes()
                });
                self.carry = 0;
                self.first = 0;
                self.pending = blocks as u8;
                self.phase = Phase::Padded;
            }
            Phase::Padded => self.phase = Phase::Done,
            Phase::Free | Phase::Open | Phase::Done => {}
        }
    }
}

/// Streaming multi-buffer hashing: one independent message per lane, each fed chunk by chunk
/// ([`Md5Multi`] for MD5, [`Sha1Multi`] for SHA-1).
///
/// A lane's life: [`update`](Multi::update) any number of times (each time the lane must
/// not be [`busy`](Multi::busy)), then [`finish`](Multi::finish); [`run`](Multi::run)
/// hashes all busy lanes together until at least one of them is no longer busy and says
/// which; [`digest`](Multi::digest) then takes a finished lane's digest and frees the lane
/// for the next message. Chunks are borrowed, not copied (only a partial block of at most 63
/// bytes per lane is), so they must outlive the engine's use of them (`'a`).
///
/// ```
/// use dump_core::hash::{md5, Md5Multi};
///
/// let (x, y) = (vec![1u8; 5000], vec![2u8; 300]);
/// let mut mb = Md5Multi::new();
/// mb.update(0, &x[..2000]);
/// mb.update(1, &y);
/// mb.finish(1);
/// let mut got = [None, None];
/// while got.iter().any(Option::is_none) {
///     let ready = mb.run();
///     for lane in 0..2 {
///         if ready & (1 << lane) == 0 {
///             continue;
///         }
///         match mb.digest(lane) {
///             Some(d) => got[lane] = Some(d),
///             // Lane 0 has hashed its first chunk: feed it the rest and close it.
///             None => {
///                 mb.update(0, &x[2000..]);
///                 mb.finish(0);
///             }
///         }
///     }
/// }
/// assert_eq!(got, [Some(md5(&x)), Some(md5(&y))]);
/// ```
#[derive(Clone)]
pub struct Multi<'a, H: LaneHash> {
    backend: MultiBackend,
    st: State,
    lanes: [Lane<'a>; MD5_MAX_LANES],
    hash: PhantomData<H>,
}

/// The multi-buffer MD5 engine.
pub type Md5Multi<'a> = Multi<'a, Md5>;

/// The multi-buffer SHA-1 engine.
///
/// ```
/// use dump_core::hash::{hex, Sha1Multi};
///
/// let mut mb = Sha1Multi::new();
/// mb.update(2, b"abc");
/// mb.finish(2);
/// while mb.run() != 0 {}
/// let d = mb.digest(2).unwrap();
/// assert_eq!(hex(&d).as_str(), "a9993e364706816aba3e25717850c26c9cd0d89d");
/// ```
pub type Sha1Multi<'a> = Multi<'a, Sha1>;

impl<H: LaneHash> Default for Multi<'_, H> {
    fn default() -> Self {
        Multi::new()
    }
}

impl<H: LaneHash> core::fmt::Debug for Multi<'_, H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(if H::BIG_ENDIAN {
            "Sha1Multi"
        } else {
            "Md5Multi"
        })
        .field("backend", &self.backend)
        .field("busy", &self.busy_mask())
        .finish_non_exhaustive()
    }
}

impl<'a, H: LaneHash> Multi<'a, H> {
    /// An engine with every lane free, using the fastest backend ([`MultiBackend::detect`]).
    pub fn new() -> Multi<'a, H> {
        Multi::build(MultiBackend::detect())
    }

    /// An engine on an explicit backend (tests and benchmarks); `None` if this CPU lacks it.
    pub fn with_backend(backend: MultiBackend) -> Option<Multi<'a, H>> {
        backend.available().then(|| Multi::build(backend))
    }

    fn build(backend: MultiBackend) -> Multi<'a, H> {
        Multi {
            backend,
            st: [[0; MD5_MAX_LANES]; 5],
            lanes: [Lane::FREE; MD5_MAX_LANES],
            hash: PhantomData,
        }
    }

    /// The backend in use.
    pub fn backend(&self) -> MultiBackend {
        self.backend
    }

    /// Lanes `0..lanes()` are usable.
    pub fn lanes(&self) -> usize {
        self.backend.lanes()
    }

    /// `true` while `lane` holds input that [`run`](Multi::run) has not hashed yet (fed
    /// bytes beyond a partial block, or a finished message's padding).
    ///
    /// # Panics
    /// If `lane >= self.lanes()`.
    pub fn busy(&self, lane: usize) -> bool {
        self.lane(lane).busy()
    }

    fn lane(&self, lane: usize) -> &Lane<'a> {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        &self.lanes[lane]
    }

    fn lane_mut(&mut self, lane: usize) -> &mut Lane<'a> {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        &mut self.lanes[lane]
    }

    /// Starts a message in a free lane.
    fn open(&mut self, lane: usize) {
        if self.lane(lane).phase == Phase::Free {
            self.lanes[lane] = Lane {
                phase: Phase::Open,
                ..Lane::FREE
            };
            for (row, iv) in self.st.iter_mut().zip(H::IV) {
                row[lane] = iv;
            }
        }
    }

    /// Feeds the next `chunk` of `lane`'s message (any length; a free lane starts a new
    /// message). Nothing is hashed until [`run`](Multi::run).
    ///
    /// # Panics
    /// If `lane` is out of range, [`busy`](Multi::busy), finished, or holds a digest.
    pub fn update(&mut self, lane: usize, chunk: &'a [u8]) {
        self.open(lane);
        let l = self.lane_mut(lane);
        assert!(
            l.phase == Phase::Open,
            "lane {lane} is finished; take its digest first"
        );
        assert!(!l.busy(), "lane {lane} is busy; call run() first");
        l.len = l.len.wrapping_add(chunk.len() as u64);
        let mut rest = chunk;
        if l.carry > 0 {
            let carry = usize::from(l.carry);
            let take = (64 - carry).min(rest.len());
            l.buf[carry..carry + take].copy_from_slice(&rest[..take]);
            rest = &rest[take..];
            if carry + take == 64 {
                l.carry = 0;
                l.first = 0;
                l.pending = 1;
            } else {
                l.carry = (carry + take) as u8;
            }
        }
        l.ext = rest;
        l.settle(H::BIG_ENDIAN);
    }

    /// Ends `lane`'s message (a free lane gets the empty message). Pending input stays
    /// queued; the digest is ready after [`run`](Multi::run) reports the lane.
    ///
    /// # Panics
    /// If `lane` is out of range or its message is already finished.
    pub fn finish(&mut self, lane: usize) {
        self.open(lane);
        let l = self.lane_mut(lane);
        assert!(l.phase == Phase::Open, "lane {lane} is already finished");
        l.phase = Phase::Closing;
        l.settle(H::BIG_ENDIAN);
    }

    /// Takes the digest of `lane`'s finished message and frees the lane; `None` (lane
    /// unchanged) if the lane holds no digest yet.
    ///
    /// # Panics
    /// If `lane` is out of range.
    pub fn digest(&mut self, lane: usize) -> Option<H::Digest> {
        if self.lane(lane).phase != Phase::Done {
            return None;
        }
        self.lanes[lane].phase = Phase::Free;
        let mut out = H::Digest::default();
        for (dst, row) in out.as_mut().chunks_exact_mut(4).zip(&self.st) {
            dst.copy_from_slice(&if H::BIG_ENDIAN {
                row[lane].to_be_bytes()
            } else {
                row[lane].to_le_bytes()
            });
        }
        Some(out)
    }

    /// The same engine, holding no borrowed chunk any more, so it can take chunks of another
    /// lifetime `'b`: lets a caller that reads into its own buffers refill them between rounds
    /// (feed every lane, [`run`](Multi::run) until [`busy_mask`](Multi::busy_mask) is
    /// 0, `rebind`, refill). Lane states, partial blocks and digests carry over unchanged.
    /// Gives the engine back unchanged (`Err`) while a lane still holds fed bytes that are
    /// neither hashed nor copied into its partial block.
    ///
    /// ```
    /// use dump_core::hash::{md5, Md5Multi};
    ///
    /// let mut buf = vec![1u8; 100];
    /// let mut mb: Md5Multi<'static> = Md5Multi::new();
    /// {
    ///     let mut round = mb.rebind().unwrap();
    ///     round.update(0, &buf);
    ///     while round.run() != 0 {}
    ///     mb = round.rebind().unwrap(); // `buf` is no longer borrowed
    /// }
    /// buf.fill(2);
    /// let mut round = mb.rebind().unwrap();
    /// round.update(0, &buf);
    /// round.finish(0);
    /// while round.run() != 0 {}
    /// let want: Vec<u8> = [[1u8; 100], [2u8; 100]].concat();
    /// assert_eq!(round.digest(0), Some(md5(&want)));
    /// ```
    // No allocation in dump-core: the refused engine goes back by value, not in a Box.
    #[allow(clippy::result_large_err)]
    pub fn rebind<'b>(self) -> Result<Multi<'b, H>, Multi<'a, H>> {
        if self.lanes.iter().any(|l| !l.ext.is_empty()) {
            return Err(self);
        }
        let mut lanes = [Lane::FREE; MD5_MAX_LANES];
        for (to, from) in lanes.iter_mut().zip(&self.lanes) {
            *to = Lane {
                phase: from.phase,
                ext: &[],
                buf: from.buf,
                carry: from.carry,
                pending: from.pending,
                first: from.first,
                len: from.len,
            };
        }
        Ok(Multi {
            backend: self.backend,
            st: self.st,
            lanes,
            hash: PhantomData,
        })
    }

    /// Lanes with pending input, bit `i` for lane `i`.
    pub fn busy_mask(&self) -> u32 {
        (0..self.lanes())
            .filter(|&i| self.lanes[i].busy())
            .fold(0, |m, i| m | 1 << i)
    }

    /// Hashes the pending input of all busy lanes together until at least one of them is no
    /// longer busy, and returns those lanes (bit `i` for lane `i`): each either holds a
    /// digest ([`digest`](Multi::digest)) or waits for its next chunk. Returns 0 at once if
    /// no lane is busy.
    pub fn run(&mut self) -> u32 {
        let lanes = self.lanes();
        loop {
            let busy = self.busy_mask();
            let Some(lead) = (0..lanes).find(|&i| busy & (1 << i) != 0) else {
                return 0;
            };
            let n = if busy.count_ones() <= H::scalar_lanes(self.backend) {
                // Few messages left in flight (a large tensor among small ones): scalar
                // streams one after another beat a few busy lanes of a vector kernel, and idle
                // lanes need no restoring. Every busy lane hashes the run of blocks the
                // shortest one holds, as the vector kernel would.
                let n = (0..lanes)
                    .filter(|&i| busy & (1 << i) != 0)
                    .map(|i| self.lanes[i].source().len() / 64)
                    .min()
                    .unwrap_or(0);
                for i in (0..lanes).filter(|&i| busy & (1 << i) != 0) {
                    let (blocks, _) = self.lanes[i].source().as_chunks::<64>();
                    let mut s = [0u32; 5];
                    for (w, row) in s.iter_mut().zip(&self.st) {
                        *w = row[i];
                    }
                    H::compress_one(&mut s, &blocks[..n]);
                    for (row, w) in self.st.iter_mut().zip(s) {
                        row[i] = w;
                    }
                }
                n
            } else {
                let mut n = usize::MAX;
                let mut src: [&[u8]; MD5_MAX_LANES] = [&[]; MD5_MAX_LANES];
                for (i, s) in src.iter_mut().enumerate().take(lanes) {
                    // Idle lanes hash a copy of the lead lane's blocks; their state is restored.
                    let from = if busy & (1 << i) != 0 { i } else { lead };
                    *s = self.lanes[from].source();
                    n = n.min(s.len() / 64);
                }
                let saved = self.st;
                H::compress(self.backend, &mut self.st, &src, n);
                for i in (0..lanes).filter(|&i| busy & (1 << i) == 0) {
                    for (row, old) in self.st.iter_mut().zip(&saved) {
                        row[i] = old[i];
                    }
                }
                n
            };
            let mut ready = 0;
            for i in (0..lanes).filter(|&i| busy & (1 << i) != 0) {
                let l = &mut self.lanes[i];
                l.consume(n);
                l.settle(H::BIG_ENDIAN);
                if !l.busy() {
                    ready |= 1 << i;
                }
            }
            if ready != 0 {
                return ready;
            }
        }
    }
}

/// MD5 of every message of `messages` into the same index of `out`, hashed side by side with
/// the fastest backend ([`MultiBackend::detect`]). Identical to calling
/// [`md5`](super::md5()) on each; entries of `out` beyond `messages.len()` are untouched.
///
/// Gives [`Error::BufferTooSmall`] (counted in digests) if `out` is shorter than `messages`.
pub fn md5_many(messages: &[&[u8]], out: &mut [[u8; 16]]) -> Result<(), Error> {
    many_with::<Md5>(MultiBackend::detect(), messages, out)
}

/// [`md5_many`] on an explicit backend (tests and benchmarks).
///
/// # Panics
/// If `!backend.available()`.
pub fn md5_many_with(
    backend: MultiBackend,
    messages: &[&[u8]],
    out: &mut [[u8; 16]],
) -> Result<(), Error> {
    many_with::<Md5>(backend, messages, out)
}

/// SHA-1 of every message of `messages` into the same index of `out`, hashed side by side
/// with the fastest backend ([`MultiBackend::detect`]); identical to one-stream SHA-1 of
/// each (MindSpore's `hash:sha1` of a small tensor). Entries of `out` beyond
/// `messages.len()` are untouched.
///
/// Gives [`Error::BufferTooSmall`] (counted in digests) if `out` is shorter than `messages`.
pub fn sha1_many(messages: &[&[u8]], out: &mut [[u8; 20]]) -> Result<(), Error> {
    many_with::<Sha1>(MultiBackend::detect(), messages, out)
}

/// [`sha1_many`] on an explicit backend (tests and benchmarks).
///
/// # Panics
/// If `!backend.available()`.
pub fn sha1_many_with(
    backend: MultiBackend,
    messages: &[&[u8]],
    out: &mut [[u8; 20]],
) -> Result<(), Error> {
    many_with::<Sha1>(backend, messages, out)
}

/// The indices `0..n` in batches of up to [`BATCH`], each batch longest first: the order in
/// which the `*_many` functions start their messages, so that the last to finish are short
/// ones and few lanes idle at the end. Holds the batch's order (2 KiB), nothing allocated.
pub(super) struct LongestFirst {
    order: [u16; BATCH],
    n: usize,
    /// Next unsorted index.
    next: usize,
    /// First index of the current batch, its size, and the position in it.
    start: usize,
    end: usize,
    pos: usize,
}

impl LongestFirst {
    /// The order of `n` items.
    pub(super) fn new(n: usize) -> LongestFirst {
        LongestFirst {
            order: [0; BATCH],
            n,
            next: 0,
            start: 0,
            end: 0,
            pos: 0,
        }
    }

    /// The next index, given each item's length by `len`; `None` when all were given.
    pub(super) fn next(&mut self, len: impl Fn(usize) -> usize) -> Option<usize> {
        if self.pos == self.end {
            if self.next == self.n {
                return None;
            }
            self.start = self.next;
            self.end = BATCH.min(self.n - self.next);
            let start = self.start;
            for (k, o) in self.order[..self.end].iter_mut().enumerate() {
                *o = k as u16;
            }
            self.order[..self.end]
                .sort_unstable_by_key(|&k| core::cmp::Reverse(len(start + usize::from(k))));
            self.next += self.end;
            self.pos = 0;
        }
        let i = self.start + usize::from(self.order[self.pos]);
        self.pos += 1;
        Some(i)
    }
}

/// The digest of every message into the same index of `out`, on `backend`.
fn many_with<H: LaneHash>(
    backend: MultiBackend,
    messages: &[&[u8]],
    out: &mut [H::Digest],
) -> Result<(), Error> {
    if out.len() < messages.len() {
        return Err(Error::BufferTooSmall {
            needed: messages.len(),
            available: out.len(),
        });
    }
    let Some(mut mb) = Multi::<H>::with_backend(backend) else {
        panic!(
            "{} backend {} is not available on this CPU",
            H::NAME,
            backend.name()
        );
    };
    const NONE: usize = usize::MAX;
    let mut owner = [NONE; MD5_MAX_LANES];
    let mut order = LongestFirst::new(messages.len());
    loop {
        for (lane, own) in owner.iter_mut().enumerate().take(mb.lanes()) {
            if *own != NONE {
                continue;
            }
            let Some(i) = order.next(|i| messages[i].len()) else {
                break;
            };
            *own = i;
            mb.update(lane, messages[i]);
            mb.finish(lane);
        }
        let ready = mb.run();
        if ready == 0 {
            return Ok(());
        }
        for (lane, own) in owner.iter_mut().enumerate() {
            if ready & (1 << lane) != 0 {
                // Every started lane was finished at once, so a ready lane holds its digest.
                if let Some(d) = mb.digest(lane) {
                    out[*own] = d;
                }
                *own = NONE;
            }
        }
    }
}
