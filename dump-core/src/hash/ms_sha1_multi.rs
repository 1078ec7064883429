//! [`MsSha1Multi`]: MindSpore's `hash:sha1` ([`MsSha1`](super::MsSha1)) of up to 16 tensors at
//! once, every slice hashed in the lanes of one [`Sha1Multi`] engine.

use crate::DType;
use sha1::Digest as _;

use super::{MD5_MAX_LANES, SHA1_SLICE_ELEMS, Sha1Multi, hex};

/// The sliced scheme's state of one lane (tensors of more than 20480 elements).
#[derive(Clone)]
struct Sliced {
    /// SHA-1 of the concatenated hex digests of the slices hashed so far.
    outer: sha1::Sha1,
    /// Bytes of the current slice given to the engine (`< slice_bytes`).
    filled: usize,
    /// Bytes per slice.
    slice_bytes: usize,
}

/// One lane's tensor.
#[derive(Clone)]
struct Tensor<'a> {
    /// `None`: at most 20480 elements, the engine lane carries the whole tensor.
    sliced: Option<Sliced>,
    /// Fed bytes not given to the engine yet.
    rest: &'a [u8],
    /// [`MsSha1Multi::finish`] was called.
    closing: bool,
    /// The engine lane holds a finished message whose digest is not taken yet.
    awaiting: bool,
    /// The tensor's digest.
    done: Option<[u8; 20]>,
}

/// MindSpore 2.10 `hash:sha1` of one tensor per lane, the SHA-1s of all lanes' slices (or of
/// their whole bytes, for tensors of at most 20480 elements) computed side by side by a
/// [`Sha1Multi`] engine. Digests are identical to [`ms_sha1`](super::ms_sha1) of each tensor.
///
/// A lane's life: [`start`](MsSha1Multi::start) with the tensor's dtype and element count,
/// [`update`](MsSha1Multi::update) with its bytes in pieces (each piece after the previous one
/// was consumed by [`run`](MsSha1Multi::run)), [`finish`](MsSha1Multi::finish), `run`, then
/// [`digest`](MsSha1Multi::digest). `run` hashes until no lane holds fed bytes, so a caller
/// that reads every lane's next chunk into its own buffer can feed all lanes, `run`,
/// [`rebind`](MsSha1Multi::rebind) and refill.
///
/// ```
/// use dump_core::{DType, hash::{ms_sha1, MsSha1Multi}};
///
/// let big: Vec<u8> = (0..4 * 50_000u32).map(|i| (i * 7) as u8).collect();
/// let mut mb = MsSha1Multi::new();
/// mb.start(0, DType::Float32, 50_000); // sliced: 3 slices
/// mb.start(1, DType::UInt8, 3); // direct
/// mb.update(0, &big);
/// mb.update(1, b"abc");
/// mb.finish(0);
/// mb.finish(1);
/// mb.run();
/// assert_eq!(mb.digest(0), Some(ms_sha1(DType::Float32, &big, 50_000)));
/// assert_eq!(mb.digest(1), Some(ms_sha1(DType::UInt8, b"abc", 3)));
/// ```
#[derive(Clone)]
pub struct MsSha1Multi<'a> {
    mb: Sha1Multi<'a>,
    lanes: [Option<Tensor<'a>>; MD5_MAX_LANES],
}

impl Default for MsSha1Multi<'_> {
    fn default() -> Self {
        MsSha1Multi::new()
    }
}

impl core::fmt::Debug for MsSha1Multi<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MsSha1Multi")
            .field("engine", &self.mb)
            .finish_non_exhaustive()
    }
}

impl<'a> MsSha1Multi<'a> {
    /// Every lane free, on the fastest backend.
    pub fn new() -> MsSha1Multi<'a> {
        MsSha1Multi::on(Sha1Multi::new())
    }

    /// On an explicit engine (a backend of choice); `engine`'s lanes must all be free.
    ///
    /// # Panics
    /// If a lane of `engine` is busy.
    pub fn on(engine: Sha1Multi<'a>) -> MsSha1Multi<'a> {
        assert_eq!(engine.busy_mask(), 0, "the engine must be idle");
        MsSha1Multi {
            mb: engine,
            lanes: [const { None }; MD5_MAX_LANES],
        }
    }

    /// Lanes `0..lanes()` are usable.
    pub fn lanes(&self) -> usize {
        self.mb.lanes()
    }

    fn tensor(&mut self, lane: usize) -> &mut Tensor<'a> {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        match &mut self.lanes[lane] {
            Some(t) if t.done.is_none() => t,
            Some(_) => panic!("lane {lane} holds a digest; take it first"),
            None => panic!("lane {lane} has no tensor; call start() first"),
        }
    }

    /// Starts a tensor of `elems` elements of `dtype` in `lane`.
    ///
    /// # Panics
    /// If `lane` is out of range or still holds a tensor (take its digest first).
    pub fn start(&mut self, lane: usize, dtype: DType, elems: usize) {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        assert!(
            self.lanes[lane].is_none(),
            "lane {lane} still holds a tensor"
        );
        let sliced = (elems > SHA1_SLICE_ELEMS).then(|| Sliced {
            outer: sha1::Sha1::new(),
            filled: 0,
            // 20480 elements of at most 16 bytes never overflow; `max(1)` keeps the slice
            // non-empty whatever `storage_bytes` returns (as `MsSha1` does).
            slice_bytes: dtype
                .storage_bytes(SHA1_SLICE_ELEMS)
                .unwrap_or(usize::MAX)
                .max(1),
        });
        self.lanes[lane] = Some(Tensor {
            sliced,
            rest: &[],
            closing: false,
            awaiting: false,
            done: None,
        });
    }

    /// Feeds the next bytes of `lane`'s tensor; hashed by the next [`run`](MsSha1Multi::run).
    ///
    /// # Panics
    /// If the lane has no open tensor, is finished, or still holds unconsumed bytes.
    pub fn update(&mut self, lane: usize, chunk: &'a [u8]) {
        let t = self.tensor(lane);
        assert!(!t.closing, "lane {lane} is finished");
        assert!(t.rest.is_empty(), "lane {lane} is busy; call run() first");
        t.rest = chunk;
    }

    /// Ends `lane`'s tensor; its digest is ready after the next [`run`](MsSha1Multi::run).
    ///
    /// # Panics
    /// If the lane has no open tensor or is already finished.
    pub fn finish(&mut self, lane: usize) {
        let t = self.tensor(lane);
        assert!(!t.closing, "lane {lane} is already finished");
        t.closing = true;
    }

    /// Hashes every lane's fed bytes (and the last slice and outer digest of finished lanes).
    pub fn run(&mut self) {
        loop {
            for lane in 0..self.lanes() {
                self.pump(lane);
            }
            if self.mb.run() == 0 {
                return;
            }
        }
    }

    /// Hashes until at least one lane holds a digest (or no lane holds input) and returns the
    /// lanes holding digests (bit `i` for lane `i`), so a scheduler can refill them while the
    /// other lanes' tensors are still in flight.
    pub fn run_any(&mut self) -> u32 {
        loop {
            for lane in 0..self.lanes() {
                self.pump(lane);
            }
            let done = self.done_mask();
            if done != 0 || self.mb.run() == 0 {
                return done;
            }
        }
    }

    /// Lanes holding a digest.
    fn done_mask(&self) -> u32 {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(_, t)| t.as_ref().is_some_and(|t| t.done.is_some()))
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Moves `lane` along while its engine lane is not busy: takes a finished slice's digest,
    /// feeds the next piece (up to the slice's end), finishes slices and the tensor.
    fn pump(&mut self, lane: usize) {
        let Some(t) = self.lanes[lane].as_mut() else {
            return;
        };
        while t.done.is_none() && !self.mb.busy(lane) {
            if t.awaiting {
                let Some(d) = self.mb.digest(lane) else {
                    return;
                };
                t.awaiting = false;
                match &mut t.sliced {
                    Some(s) => s.outer.update(hex(&d).as_str().as_bytes()),
                    None => t.done = Some(d),
                }
                continue;
            }
            match &mut t.sliced {
                None => {
                    if !t.rest.is_empty() {
                        self.mb.update(lane, core::mem::take(&mut t.rest));
                    } else if t.closing {
                        self.mb.finish(lane);
                        t.awaiting = true;
                    } else {
                        return;
                    }
                }
                Some(s) => {
                    if !t.rest.is_empty() {
                        let take = (s.slice_bytes - s.filled).min(t.rest.len());
                        let (now, rest) = t.rest.split_at(take);
                        self.mb.update(lane, now);
                        t.rest = rest;
                        s.filled += take;
                        if s.filled == s.slice_bytes {
                            s.filled = 0;
                            self.mb.finish(lane);
                            t.awaiting = true;
                        }
                    } else if t.closing {
                        if s.filled > 0 {
                            s.filled = 0;
                            self.mb.finish(lane);
                            t.awaiting = true;
                        } else {
                            t.done = Some(core::mem::take(&mut s.outer).finalize().into());
                        }
                    } else {
                        return;
                    }
                }
            }
        }
    }

    /// Takes `lane`'s digest and frees the lane; `None` (lane unchanged) if it has none yet.
    ///
    /// # Panics
    /// If `lane` is out of range.
    pub fn digest(&mut self, lane: usize) -> Option<[u8; 20]> {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        let d = self.lanes[lane].as_ref()?.done?;
        self.lanes[lane] = None;
        Some(d)
    }

    /// Abandons `lane`'s tensor (a file that failed): its digest is never computed and the
    /// lane is free for the next [`start`](MsSha1Multi::start).
    ///
    /// # Panics
    /// If `lane` is out of range or holds unconsumed bytes.
    pub fn abandon(&mut self, lane: usize) {
        assert!(lane < self.lanes(), "lane {lane} out of range");
        if let Some(t) = &self.lanes[lane] {
            assert!(t.rest.is_empty(), "lane {lane} is busy; call run() first");
            if !t.awaiting {
                // Close whatever the engine lane holds, so it can be freed below.
                self.mb.finish(lane);
            }
            while self.mb.busy(lane) {
                self.mb.run();
            }
            let _ = self.mb.digest(lane);
        }
        self.lanes[lane] = None;
    }

    /// The same engine, holding no borrowed bytes any more, so it can take chunks of another
    /// lifetime (see [`Multi::rebind`](super::Multi::rebind)). Lane states carry over.
    /// Gives the engine back unchanged (`Err`) while a lane still holds fed bytes that
    /// [`run`](MsSha1Multi::run) has not consumed.
    #[allow(clippy::result_large_err)]
    pub fn rebind<'b>(self) -> Result<MsSha1Multi<'b>, MsSha1Multi<'a>> {
        if self.lanes.iter().flatten().any(|t| !t.rest.is_empty()) {
            return Err(self);
        }
        let mb = match self.mb.rebind() {
            Ok(mb) => mb,
            Err(mb) => {
                return Err(MsSha1Multi {
                    mb,
                    lanes: self.lanes,
                });
            }
        };
        let lanes = self.lanes.map(|t| {
            t.map(|t| Tensor {
                sliced: t.sliced,
                rest: &[],
                closing: t.closing,
                awaiting: t.awaiting,
                done: t.done,
            })
        });
        Ok(MsSha1Multi { mb, lanes })
    }
}

/// MindSpore's `hash:sha1` of every `(dtype, bytes, elems)` of `tensors` into the same index
/// of `out`, identical to [`ms_sha1`](super::ms_sha1) of each: the tensors' slices are hashed
/// side by side in the lanes of one [`Sha1Multi`] engine (the fastest backend), up to 16
/// tensors at a time, largest first (in batches of 1024), a lane refilled as soon as its
/// tensor is done. Entries of `out` beyond `tensors.len()` are untouched.
///
/// Gives [`Error::BufferTooSmall`](crate::Error::BufferTooSmall) (counted in digests) if `out`
/// is shorter than `tensors`.
///
/// ```
/// use dump_core::{DType, hash::{ms_sha1, ms_sha1_many}};
///
/// let big = vec![3u8; 4 * 30_000];
/// let tensors = [(DType::Float32, &big[..], 30_000), (DType::Int8, &b"abc"[..], 3)];
/// let mut out = [[0u8; 20]; 2];
/// ms_sha1_many(&tensors, &mut out).unwrap();
/// assert_eq!(out[0], ms_sha1(DType::Float32, &big, 30_000));
/// assert_eq!(out[1], ms_sha1(DType::Int8, b"abc", 3));
/// ```
pub fn ms_sha1_many(
    tensors: &[(DType, &[u8], usize)],
    out: &mut [[u8; 20]],
) -> Result<(), crate::Error> {
    if out.len() < tensors.len() {
        return Err(crate::Error::BufferTooSmall {
            needed: tensors.len(),
            available: out.len(),
        });
    }
    const NONE: usize = usize::MAX;
    let mut mb = MsSha1Multi::new();
    let lanes = mb.lanes();
    let mut owner = [NONE; MD5_MAX_LANES];
    let mut order = super::multi::LongestFirst::new(tensors.len());
    loop {
        for (lane, own) in owner.iter_mut().enumerate().take(lanes) {
            if *own != NONE {
                continue;
            }
            let Some(i) = order.next(|i| tensors[i].1.len()) else {
                break;
            };
            *own = i;
            let (dtype, bytes, elems) = tensors[i];
            mb.start(lane, dtype, elems);
            mb.update(lane, bytes);
            mb.finish(lane);
        }
        let done = mb.run_any();
        if done == 0 {
            return Ok(());
        }
        for (lane, own) in owner.iter_mut().enumerate() {
            if done & (1 << lane) != 0 {
                if let Some(d) = mb.digest(lane) {
                    out[*own] = d;
                }
                *own = NONE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{MultiBackend, ms_sha1, tests::data};
    use proptest::prelude::*;

    fn engines() -> Vec<MsSha1Multi<'static>> {
        [
            MultiBackend::Portable,
            MultiBackend::Avx2,
            MultiBackend::Avx512,
        ]
        .into_iter()
        .filter_map(Sha1Multi::with_backend)
        .map(MsSha1Multi::on)
        .collect()
    }

    /// Tensors of `shapes` (dtype, elems), each fed in pieces of `piece` bytes through one
    /// reused buffer per lane (rebind between rounds), lanes refilled as they finish.
    fn hash_all(
        mut mb: MsSha1Multi<'static>,
        tensors: &[(DType, usize, Vec<u8>)],
        piece: usize,
    ) -> Vec<[u8; 20]> {
        let lanes = mb.lanes();
        let mut owner: Vec<Option<(usize, usize)>> = vec![None; lanes];
        let mut bufs = vec![Vec::new(); lanes];
        let mut next = 0;
        let mut got = vec![None; tensors.len()];
        loop {
            let mut round = mb.rebind().expect("nothing unconsumed");
            let mut any = false;
            for lane in 0..lanes {
                if owner[lane].is_none() && next < tensors.len() {
                    let (dtype, elems, _) = &tensors[next];
                    round.start(lane, *dtype, *elems);
                    owner[lane] = Some((next, 0));
                    next += 1;
                }
                let Some((i, at)) = owner[lane] else { continue };
                any = true;
                let bytes = &tensors[i].2;
                let n = piece.min(bytes.len() - at);
                bufs[lane].clear();
                bufs[lane].extend_from_slice(&bytes[at..at + n]);
                owner[lane] = Some((i, at + n));
            }
            if !any {
                return got
                    .into_iter()
                    .map(|d| d.expect("every tensor hashed"))
                    .collect();
            }
            for lane in 0..lanes {
                let Some((i, at)) = owner[lane] else { continue };
                round.update(lane, &bufs[lane]);
                if at == tensors[i].2.len() {
                    round.finish(lane);
                }
            }
            round.run();
            for (lane, own) in owner.iter_mut().enumerate() {
                if let Some(d) = round.digest(lane) {
                    let (i, _) = own.take().expect("a finished lane has an owner");
                    got[i] = Some(d);
                }
            }
            mb = round.rebind().expect("run() consumed every piece");
        }
    }

    #[test]
    fn equals_one_tensor_at_a_time() {
        let shapes = [
            (DType::Float32, 0),
            (DType::Float32, 1),
            (DType::Float32, 20480),
            (DType::Float32, 20481),
            (DType::Float32, 40960),
            (DType::Float32, 40960 + 7),
            (DType::Float16, 100_003),
            (DType::BFloat16, 61441),
            (DType::Int8, 20480 * 3 + 100),
            (DType::Complex128, 20485),
            (DType::Int4, 20483),
            (DType::UInt1, 41000),
            (DType::Float64, 300_000),
            (DType::Int32, 5),
            (DType::Float32, 262_144),
            (DType::UInt8, 64),
            (DType::UInt8, 20480),
            (DType::Float32, 123_457),
        ];
        let tensors: Vec<(DType, usize, Vec<u8>)> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(dtype, elems))| {
                let n = dtype.storage_bytes(elems).unwrap();
                (dtype, elems, data(n, i as u64 + 11))
            })
            .collect();
        let want: Vec<[u8; 20]> = tensors.iter().map(|(d, e, b)| ms_sha1(*d, b, *e)).collect();
        for piece in [1000, 65_536, 262_144, 1 << 24] {
            for mb in engines() {
                let name = mb.mb.backend().name();
                assert_eq!(
                    hash_all(mb, &tensors, piece),
                    want,
                    "{name}, pieces of {piece}"
                );
            }
        }
    }

    #[test]
    fn many_equals_one_at_a_time() {
        // More tensors than lanes, sizes mixed so lanes finish in different rounds.
        let tensors: Vec<(DType, usize, Vec<u8>)> = (0..40)
            .map(|i| {
                let (dtype, elems) = match i % 5 {
                    0 => (DType::Float32, 20_000 + 7919 * i),
                    1 => (DType::UInt8, 17 * i),
                    2 => (DType::Float16, 20_481 + i),
                    3 => (DType::Int8, 0),
                    _ => (DType::Float64, 100_000 - 1000 * i),
                };
                let n = dtype.storage_bytes(elems).unwrap();
                (dtype, elems, data(n, i as u64))
            })
            .collect();
        let args: Vec<(DType, &[u8], usize)> =
            tensors.iter().map(|(d, e, b)| (*d, &b[..], *e)).collect();
        let want: Vec<[u8; 20]> = args.iter().map(|&(d, b, e)| ms_sha1(d, b, e)).collect();
        let mut out = vec![[0u8; 20]; args.len() + 1];
        ms_sha1_many(&args, &mut out).unwrap();
        assert_eq!(out[..args.len()], want[..]);
        assert_eq!(out[args.len()], [0u8; 20], "untouched");
        assert!(ms_sha1_many(&args, &mut out[..3]).is_err());
        assert!(ms_sha1_many(&[], &mut []).is_ok());
    }

    #[test]
    fn abandoned_lanes_are_reusable() {
        for mut mb in engines() {
            let a = data(4 * 50_000, 1);
            let b = data(300, 2);
            mb.start(0, DType::Float32, 50_000);
            mb.update(0, &a[..100_001]);
            mb.start(1, DType::UInt8, 300);
            mb.update(1, &b[..10]);
            mb.start(2, DType::UInt8, 0);
            mb.run();
            mb.abandon(0);
            mb.abandon(1);
            mb.abandon(2);
            mb.abandon(3); // a free lane
            mb.start(0, DType::UInt8, 300);
            mb.update(0, &b);
            mb.finish(0);
            mb.start(1, DType::Float32, 50_000);
            mb.update(1, &a);
            mb.finish(1);
            mb.run();
            assert_eq!(mb.digest(0), Some(ms_sha1(DType::UInt8, &b, 300)));
            assert_eq!(mb.digest(1), Some(ms_sha1(DType::Float32, &a, 50_000)));
            assert_eq!(mb.digest(1), None, "taken");
        }
    }

    #[test]
    fn rebind_refuses_unconsumed_bytes() {
        let a = data(500, 3);
        let mut mb = MsSha1Multi::new();
        mb.start(0, DType::UInt8, 500);
        mb.update(0, &a);
        let mut mb = mb.rebind::<'static>().expect_err("lane 0 holds fed bytes");
        mb.finish(0);
        mb.run();
        assert_eq!(mb.digest(0), Some(ms_sha1(DType::UInt8, &a, 500)));
        assert!(format!("{mb:?}").starts_with("MsSha1Multi"));
    }

    #[test]
    #[should_panic(expected = "start() first")]
    fn update_without_start_panics() {
        let mut mb = MsSha1Multi::new();
        mb.update(0, b"x");
    }

    #[test]
    #[should_panic(expected = "busy")]
    fn update_twice_without_run_panics() {
        let mut mb = MsSha1Multi::new();
        mb.start(0, DType::UInt8, 2);
        mb.update(0, b"x");
        mb.update(0, b"y");
    }

    #[test]
    #[should_panic(expected = "still holds a tensor")]
    fn start_twice_panics() {
        let mut mb = MsSha1Multi::new();
        mb.start(0, DType::UInt8, 2);
        mb.start(0, DType::UInt8, 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// Random tensors (dtype, size around the slice threshold) and piece sizes.
        #[test]
        fn random_sets_equal_ms_sha1(
            shapes in proptest::collection::vec((0usize..6, 0usize..90_000), 1..24),
            piece in 1usize..200_000,
            seed in any::<u64>(),
        ) {
            let dtypes = [DType::Float32, DType::Float16, DType::Int8, DType::Float64, DType::Int4, DType::Bool];
            let tensors: Vec<(DType, usize, Vec<u8>)> = shapes
                .iter()
                .enumerate()
                .map(|(i, &(d, elems))| {
                    let dtype = dtypes[d];
                    let n = dtype.storage_bytes(elems).unwrap();
                    (dtype, elems, data(n, seed ^ i as u64))
                })
                .collect();
            let want: Vec<[u8; 20]> = tensors.iter().map(|(d, e, b)| ms_sha1(*d, b, *e)).collect();
            for mb in engines() {
                prop_assert_eq!(hash_all(mb, &tensors, piece), want.clone());
            }
        }
    }
}
