use super::*;
use crate::hash::{md5, tests::data};
use proptest::prelude::*;
use sha1::Digest as _;

/// The one-stream digest each engine must match.
trait Reference: LaneHash {
    fn one(m: &[u8]) -> Self::Digest;
    fn many(backend: MultiBackend, msgs: &[&[u8]], out: &mut [Self::Digest]) -> Result<(), Error>;
}

impl Reference for Md5 {
    fn one(m: &[u8]) -> [u8; 16] {
        md5(m)
    }
    fn many(backend: MultiBackend, msgs: &[&[u8]], out: &mut [[u8; 16]]) -> Result<(), Error> {
        md5_many_with(backend, msgs, out)
    }
}

impl Reference for Sha1 {
    fn one(m: &[u8]) -> [u8; 20] {
        sha1::Sha1::digest(m).into()
    }
    fn many(backend: MultiBackend, msgs: &[&[u8]], out: &mut [[u8; 20]]) -> Result<(), Error> {
        sha1_many_with(backend, msgs, out)
    }
}

/// Runs a generic test for MD5 and SHA-1.
macro_rules! both {
    ($($name:ident => $generic:ident;)*) => {
        $(
            #[test]
            fn $name() {
                $generic::<Md5>();
                $generic::<Sha1>();
            }
        )*
    };
}

both! {
    padding_boundaries => padding_boundaries_of;
    empty_set_and_short_output => empty_set_and_short_output_of;
    more_messages_than_a_batch => more_messages_than_a_batch_of;
    one_large_message_among_small_ones => one_large_message_among_small_ones_of;
    few_busy_lanes_take_the_scalar_path => few_busy_lanes_take_the_scalar_path_of;
    streaming_lane_protocol => streaming_lane_protocol_of;
    rebind_between_rounds_with_reused_buffers => rebind_between_rounds_with_reused_buffers_of;
    kernels_equal_one_stream => kernels_equal_one_stream_of;
}

/// Every backend this CPU runs. On x86-64 machines with AVX2 / AVX-512F the vector backends
/// must be present (`OPDUMP_EXPECT_MD5_BACKENDS=avx2,avx512` makes that a hard requirement).
fn backends() -> Vec<MultiBackend> {
    let all = [
        MultiBackend::Portable,
        MultiBackend::Avx2,
        MultiBackend::Avx512,
    ];
    if let Ok(want) = std::env::var("OPDUMP_EXPECT_MD5_BACKENDS") {
        for name in want.split(',').filter(|n| !n.is_empty()) {
            let b = all
                .iter()
                .find(|b| b.name() == name)
                .expect("known backend name");
            assert!(b.available(), "backend {name} expected but not available");
        }
    }
    all.into_iter().filter(|b| b.available()).collect()
}

fn many<H: Reference>(backend: MultiBackend, msgs: &[&[u8]]) -> Vec<H::Digest> {
    let mut out = vec![H::Digest::default(); msgs.len()];
    H::many(backend, msgs, &mut out).expect("out sized");
    out
}

#[test]
fn detection_matches_cpu() {
    #[cfg(target_arch = "x86_64")]
    {
        assert_eq!(
            Md5Backend::Avx2.available(),
            std::is_x86_feature_detected!("avx2")
        );
        assert_eq!(
            Md5Backend::Avx512.available(),
            std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
        );
    }
    assert!(Md5Backend::Portable.available());
    assert!(Md5Backend::detect().available());
    for b in backends() {
        assert!(b.lanes() <= MD5_MAX_LANES);
        assert_eq!(
            Md5Multi::with_backend(b).map(|m| m.lanes()),
            Some(b.lanes())
        );
        assert_eq!(
            Sha1Multi::with_backend(b).map(|m| m.lanes()),
            Some(b.lanes())
        );
    }
}

#[test]
fn rfc1321_suite_in_every_lane() {
    let suite: [(&[u8], &str); 7] = [
        (b"", "d41d8cd98f00b204e9800998ecf8427e"),
        (b"a", "0cc175b9c0f1b6a831c399e269772661"),
        (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
        (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (
            b"abcdefghijklmnopqrstuvwxyz",
            "c3fcd3d76192e4007dfb496cca67e13b",
        ),
        (
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "d174ab98d277d9f5a5611c2c9f419d9f",
        ),
        (
            b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a",
        ),
    ];
    for b in backends() {
        // Each vector at every lane position (messages rotate through the lanes).
        let msgs: Vec<&[u8]> = (0..3 * MD5_MAX_LANES).map(|i| suite[i % 7].0).collect();
        for (i, d) in many::<Md5>(b, &msgs).iter().enumerate() {
            assert_eq!(crate::hash::hex(d).as_str(), suite[i % 7].1, "{b:?} #{i}");
        }
    }
}

#[test]
fn fips180_suite_in_every_lane() {
    // FIPS 180 examples and the NIST CAVS "long message" style lengths around blocks.
    let long = b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    let million = vec![b'a'; 1_000_000];
    let suite: [(&[u8], &str); 5] = [
        (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
        (long, "a49b2446a02c645bf419f995b67091253a04a259"),
        (&million, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
    ];
    for b in backends() {
        // Each vector at many lane positions, the million-byte one only once.
        let mut msgs: Vec<&[u8]> = (0..2 * MD5_MAX_LANES + 1).map(|i| suite[i % 4].0).collect();
        msgs.insert(5, suite[4].0);
        for (i, d) in many::<Sha1>(b, &msgs).iter().enumerate() {
            let want = suite.iter().find(|s| s.0 == msgs[i]).unwrap().1;
            assert_eq!(crate::hash::hex(d).as_str(), want, "{b:?} #{i}");
        }
    }
}

fn padding_boundaries_of<H: Reference>() {
    let lens = [
        0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096,
    ];
    let bufs: Vec<Vec<u8>> = lens.iter().map(|&n| data(n, n as u64 + 3)).collect();
    let msgs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
    for b in backends() {
        for (m, d) in msgs.iter().zip(many::<H>(b, &msgs)) {
            assert_eq!(d, H::one(m), "{} {b:?} len {}", H::NAME, m.len());
        }
    }
}

fn empty_set_and_short_output_of<H: Reference>() {
    for b in backends() {
        assert!(H::many(b, &[], &mut []).is_ok());
        let mut out = [H::Digest::default(); 1];
        assert_eq!(
            H::many(b, &[b"a", b"b"], &mut out),
            Err(Error::BufferTooSmall {
                needed: 2,
                available: 1
            })
        );
        // Longer output: the tail is left alone.
        let mut nines = H::Digest::default();
        nines.as_mut().fill(9);
        let mut out = [nines; 3];
        H::many(b, &[b"x"], &mut out).unwrap();
        assert_eq!(out[0], H::one(b"x"));
        assert_eq!(out[1..], [nines; 2]);
    }
    let mut out = [[0u8; 16]; 2];
    md5_many(&[b"", b"abc"], &mut out).unwrap();
    assert_eq!(out, [md5(b""), md5(b"abc")]);
    let mut out = [[0u8; 20]; 2];
    sha1_many(&[b"", b"abc"], &mut out).unwrap();
    assert_eq!(out, [Sha1::one(b""), Sha1::one(b"abc")]);
}

fn more_messages_than_a_batch_of<H: Reference>() {
    // Several sort batches, long and short messages interleaved.
    let bufs: Vec<Vec<u8>> = (0..3 * BATCH + 5)
        .map(|i| data((i * 37) % 700 + (i % 5) * 64, i as u64))
        .collect();
    let msgs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
    let want: Vec<H::Digest> = msgs.iter().map(|m| H::one(m)).collect();
    for b in backends() {
        assert_eq!(many::<H>(b, &msgs), want, "{} {b:?}", H::NAME);
    }
}

fn one_large_message_among_small_ones_of<H: Reference>() {
    // The large message runs alone (the scalar path) after the small ones are done.
    let big = data(300_000 + 17, 5);
    let small: Vec<Vec<u8>> = (0..20).map(|i| data(100 + 61 * i, i as u64)).collect();
    let mut msgs: Vec<&[u8]> = vec![&big];
    msgs.extend(small.iter().map(Vec::as_slice));
    let want: Vec<H::Digest> = msgs.iter().map(|m| H::one(m)).collect();
    for b in backends() {
        assert_eq!(many::<H>(b, &msgs), want, "{} {b:?}", H::NAME);
        assert_eq!(
            many::<H>(b, &msgs[..1]),
            want[..1],
            "{} {b:?} alone",
            H::NAME
        );
    }
}

/// Two to ten large messages of different lengths left in flight: with SHA-NI, SHA-1 hashes
/// up to 4 (AVX-512) or 8 (AVX2) of them as scalar streams (the run of blocks the shortest
/// holds), the vector kernel above that and once lanes are refilled.
fn few_busy_lanes_take_the_scalar_path_of<H: Reference>() {
    for k in 2..=5 {
        let bufs: Vec<Vec<u8>> = (0..k)
            .map(|i| data(20_000 + 3_333 * i + i, i as u64))
            .collect();
        let mut msgs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        let want: Vec<H::Digest> = msgs.iter().map(|m| H::one(m)).collect();
        for b in backends() {
            assert_eq!(many::<H>(b, &msgs), want, "{} {b:?} x{k}", H::NAME);
        }
        // Then many short ones after them: lanes switch between scalar and vector runs.
        let small: Vec<Vec<u8>> = (0..40).map(|i| data(64 * i + 7, 100 + i as u64)).collect();
        msgs.extend(small.iter().map(Vec::as_slice));
        let want: Vec<H::Digest> = msgs.iter().map(|m| H::one(m)).collect();
        for b in backends() {
            assert_eq!(many::<H>(b, &msgs), want, "{} {b:?} x{k} + small", H::NAME);
        }
    }
}

fn streaming_lane_protocol_of<H: Reference>() {
    for b in backends() {
        let mut mb = Multi::<H>::with_backend(b).unwrap();
        assert_eq!(mb.run(), 0, "nothing to do");
        assert_eq!(mb.digest(0), None);
        // A short chunk stays in the lane buffer: not busy.
        mb.update(0, b"ab");
        assert!(!mb.busy(0));
        mb.update(0, b"c");
        mb.finish(0);
        assert!(mb.busy(0), "padding queued");
        assert_eq!(mb.run(), 1);
        assert_eq!(mb.digest(0), Some(H::one(b"abc")));
        assert_eq!(mb.digest(0), None, "taken");
        // The freed lane starts a fresh message.
        mb.finish(0);
        assert_eq!(mb.run(), 1);
        assert_eq!(mb.digest(0), Some(H::one(b"")));
        // A long chunk makes the lane busy until run() hashed its whole blocks.
        let big = data(1000, 1);
        mb.update(3, &big[..700]);
        assert!(mb.busy(3));
        assert_eq!(mb.busy_mask(), 1 << 3);
        assert_eq!(mb.run(), 1 << 3);
        assert!(!mb.busy(3));
        assert_eq!(mb.digest(3), None, "still open");
        mb.update(3, &big[700..]);
        mb.finish(3);
        while mb.busy(3) {
            mb.run();
        }
        assert_eq!(mb.digest(3), Some(H::one(&big)));
        let name = if H::NAME == "md5" {
            "Md5Multi"
        } else {
            "Sha1Multi"
        };
        assert!(format!("{mb:?}").starts_with(name));
    }
}

/// `rebind` refuses while a lane holds fed bytes not yet hashed, and a caller that reuses one
/// buffer per lane across rounds (messages of mixed lengths, lanes finishing in different
/// rounds, partial blocks carried over) gets every message's one-stream digest.
fn rebind_between_rounds_with_reused_buffers_of<H: Reference>() {
    for b in backends() {
        let mut mb: Multi<'static, H> = Multi::with_backend(b).unwrap();
        let lanes = mb.lanes();
        {
            let big = data(300, 9);
            let mut round = mb.rebind().unwrap();
            round.update(1, &big);
            let round = round
                .rebind::<'static>()
                .expect_err("lane 1 holds unhashed bytes");
            assert_eq!(round.busy_mask(), 1 << 1);
            let mut round = round;
            while round.run() != 0 {}
            round.finish(1);
            while round.run() != 0 {}
            assert_eq!(round.digest(1), Some(H::one(&big)));
            mb = round.rebind().unwrap();
        }
        let msgs: Vec<Vec<u8>> = (0..lanes + 3)
            .map(|i| data([0, 1, 63, 64, 65, 700, 4099, 10_000][i % 8] + i, i as u64))
            .collect();
        const PIECE: usize = 777;
        let mut bufs = vec![vec![0u8; PIECE]; lanes];
        let mut at = vec![0usize; lanes];
        let mut len = vec![0usize; lanes];
        let mut owner: Vec<Option<usize>> = vec![None; lanes];
        let mut next = 0;
        let mut got = vec![None; msgs.len()];
        loop {
            let mut round = mb.rebind().unwrap();
            let mut fed = false;
            for lane in 0..lanes {
                if owner[lane].is_none() && next < msgs.len() {
                    owner[lane] = Some(next);
                    at[lane] = 0;
                    next += 1;
                }
                let Some(m) = owner[lane] else { continue };
                let n = PIECE.min(msgs[m].len() - at[lane]);
                bufs[lane][..n].copy_from_slice(&msgs[m][at[lane]..at[lane] + n]);
                at[lane] += n;
                len[lane] = n;
                fed = true;
            }
            if !fed {
                break;
            }
            for lane in 0..lanes {
                let Some(m) = owner[lane] else { continue };
                round.update(lane, &bufs[lane][..len[lane]]);
                if at[lane] == msgs[m].len() {
                    round.finish(lane);
                }
            }
            while round.run() != 0 {}
            for lane in 0..lanes {
                if let Some(d) = round.digest(lane) {
                    got[owner[lane].take().unwrap()] = Some(d);
                }
            }
            mb = round.rebind().unwrap();
        }
        for (m, d) in msgs.iter().zip(&got) {
            assert_eq!(*d, Some(H::one(m)), "{} {b:?}, {} bytes", H::NAME, m.len());
        }
    }
}

#[test]
#[should_panic(expected = "busy")]
fn update_while_busy_panics() {
    let big = [0u8; 256];
    let mut mb = Md5Multi::new();
    mb.update(0, &big);
    mb.update(0, &big);
}

#[test]
#[should_panic(expected = "finished")]
fn update_after_finish_panics() {
    let mut mb = Md5Multi::new();
    mb.finish(1);
    mb.update(1, b"late");
}

#[test]
#[should_panic(expected = "out of range")]
fn lane_out_of_range_panics() {
    let mut mb = Md5Multi::with_backend(MultiBackend::Portable).unwrap();
    mb.update(MultiBackend::Portable.lanes(), b"x");
}

/// Lengths that hit the padding and block boundaries, plus anything up to several KiB.
fn msg_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        prop::sample::select(vec![0usize, 1, 55, 56, 57, 63, 64, 65, 127, 128, 129]),
        0usize..512,
        0usize..9000,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random message sets (fewer or many more messages than lanes), every backend.
    #[test]
    fn many_equals_one_stream(
        lens in proptest::collection::vec(msg_len(), 0..48),
        seed in any::<u64>(),
    ) {
        let bufs: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &n)| data(n, seed ^ i as u64)).collect();
        let msgs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        let want: Vec<[u8; 16]> = msgs.iter().map(|m| md5(m)).collect();
        let want_sha: Vec<[u8; 20]> = msgs.iter().map(|m| Sha1::one(m)).collect();
        for b in backends() {
            prop_assert_eq!(many::<Md5>(b, &msgs), want.clone(), "{:?}", b);
            prop_assert_eq!(many::<Sha1>(b, &msgs), want_sha.clone(), "{:?}", b);
        }
    }

    /// The streaming engine with each lane fed in random pieces, lanes refilled with the next
    /// message as they finish, pieces handed out in a scrambled lane order.
    #[test]
    fn streamed_pieces_equal_one_stream(
        lens in proptest::collection::vec(msg_len(), 1..40),
        cuts in proptest::collection::vec(0usize..700, 1..16),
        seed in any::<u64>(),
    ) {
        let bufs: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &n)| data(n, seed ^ (i as u64) << 8)).collect();
        streamed::<Md5>(&bufs, &cuts)?;
        streamed::<Sha1>(&bufs, &cuts)?;
    }
}

/// The streaming engine with each lane fed in random pieces of `bufs`, lanes refilled with
/// the next message as they finish, pieces handed out in a scrambled lane order.
fn streamed<H: Reference>(bufs: &[Vec<u8>], cuts: &[usize]) -> Result<(), TestCaseError> {
    let want: Vec<H::Digest> = bufs.iter().map(|m| H::one(m)).collect();
    #[derive(Clone, Copy)]
    enum Slot {
        Empty,
        Feeding(usize, usize),
        Finished(usize),
    }
    for b in backends() {
        let mut mb = Multi::<H>::with_backend(b).unwrap();
        let lanes = mb.lanes();
        let mut slot = vec![Slot::Empty; lanes];
        let mut next = 0;
        let mut got = vec![None; bufs.len()];
        let mut k = 0usize;
        loop {
            for step in 0..lanes {
                let lane = (step * 5 + k) % lanes;
                if mb.busy(lane) {
                    continue;
                }
                if let Slot::Finished(i) = slot[lane] {
                    got[i] = Some(mb.digest(lane).expect("finished and not busy"));
                    slot[lane] = Slot::Empty;
                }
                if matches!(slot[lane], Slot::Empty) && next < bufs.len() {
                    slot[lane] = Slot::Feeding(next, 0);
                    next += 1;
                }
                if let Slot::Feeding(i, fed) = slot[lane] {
                    if fed == bufs[i].len() {
                        mb.finish(lane);
                        slot[lane] = Slot::Finished(i);
                    } else {
                        let take = cuts[k % cuts.len()].max(1).min(bufs[i].len() - fed);
                        k += 1;
                        mb.update(lane, &bufs[i][fed..fed + take]);
                        slot[lane] = Slot::Feeding(i, fed + take);
                    }
                }
            }
            let idle = slot.iter().all(|s| matches!(s, Slot::Empty));
            if mb.run() == 0 && idle && next == bufs.len() {
                break;
            }
        }
        let got: Vec<H::Digest> = got
            .into_iter()
            .map(|d| d.expect("every message hashed"))
            .collect();
        prop_assert_eq!(&got, &want, "{} {:?}", H::NAME, b);
    }
    Ok(())
}

/// Every kernel straight, whatever the engine's dispatch would pick (with SHA-NI the engine
/// never hands SHA-1 to the portable kernel): random states and blocks in every lane,
/// compressed together, against one-stream `compress` of each lane.
fn kernels_equal_one_stream_of<H: Reference>() {
    for b in backends() {
        for n in [1usize, 2, 5] {
            let bytes: Vec<Vec<u8>> = (0..MD5_MAX_LANES)
                .map(|l| data(64 * n, (l * 31 + n) as u64))
                .collect();
            let src: [&[u8]; MD5_MAX_LANES] = core::array::from_fn(|l| &bytes[l][..]);
            let mut st: State = [[0; MD5_MAX_LANES]; 5];
            for (r, row) in st.iter_mut().enumerate().take(H::ROWS) {
                for (l, w) in row.iter_mut().enumerate() {
                    *w = (r as u32 + 1).wrapping_mul(0x9e37_79b9)
                        ^ (l as u32).wrapping_mul(0x85eb_ca6b);
                }
            }
            let mut want = st;
            for l in 0..b.lanes() {
                let mut s = [0u32; 5];
                for (w, row) in s.iter_mut().zip(&want) {
                    *w = row[l];
                }
                let (blocks, _) = src[l].as_chunks::<64>();
                H::compress_one(&mut s, blocks);
                for (row, w) in want.iter_mut().zip(s) {
                    row[l] = w;
                }
            }
            H::compress(b, &mut st, &src, n);
            for l in 0..b.lanes() {
                for r in 0..H::ROWS {
                    assert_eq!(
                        st[r][l],
                        want[r][l],
                        "{} {b:?} {n} blocks, lane {l} row {r}",
                        H::NAME
                    );
                }
            }
        }
    }
}
