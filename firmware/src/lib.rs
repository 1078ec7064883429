//! Known-answer tests of `dump-core`, `dump-npy` and `dump-stats`, run on a Cortex-M4
//! (thumbv7em-none-eabihf) in qemu.
//!
//! This proves that the three crates build and give the same answers without `std`, without an
//! allocator and on a 32-bit FPU target: statistics from MindSpore's own tests, widening, MD5,
//! MindSpore's SHA-1 hash-of-hashes, `%g` formatting and the postcard wire records (dump-core,
//! this file); `.npy` headers, whole files and the reader against MindSpore 2.10's own dump
//! ([`npy_kat`]); `statistic.csv` header and rows, host and device ([`csv_kat`]).
//! `tests/qemu_kat.rs` is the entry point; `cargo test` in this directory boots it in
//! `qemu-system-arm` (see `.cargo/config.toml`) and semihosting carries the output and exit code.
//!
//! The second program, `src/bin/agent.rs`, is a device agent: it runs a small f32 network
//! ([`net`]) and streams every operator's statistics as wire frames to a host file
//! ([`agent_run`], [`semihosting_file`]), then measures what that costs ([`measure`]).
#![no_std]
#![deny(missing_docs)]

pub mod agent_run;
mod csv;
pub mod measure;
pub mod net;
mod npy;
pub mod semihosting_file;

pub use csv::csv_kat;
pub use npy::npy_kat;

use cortex_m_semihosting::hprintln;
use dump_core::{
    DType, Error, Summary,
    fmt::{g, u64_str},
    hash::{Md5Stream, MsSha1, hex, md5, ms_sha1},
    stats::summarize,
    widen::{bf16_to_f32, f16_to_f32, int4_to_int8, uint1_to_uint8},
    wire::{
        Decoder, Event, Frame, Io, MAX_COBS_LEN, MAX_FRAME_LEN, MAX_WIRE_LEN, StatRecord,
        crc::crc32, frame::encode_wire,
    },
};

/// Counts of passed and failed checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Checks that held.
    pub passed: u32,
    /// Checks that did not (each printed as `FAIL ...`).
    pub failed: u32,
}

impl Tally {
    fn check(&mut self, name: &str, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            hprintln!("FAIL {}", name);
        }
    }

    fn check_str(&mut self, name: &str, got: &str, want: &str) {
        if got == want {
            self.passed += 1;
        } else {
            self.failed += 1;
            hprintln!("FAIL {}: got {:?}, want {:?}", name, got, want);
        }
    }

    fn check_bytes(&mut self, name: &str, got: &[u8], want: &[u8]) {
        if got == want {
            self.passed += 1;
        } else {
            self.failed += 1;
            let at = got
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            hprintln!(
                "FAIL {}: {} bytes, want {}; first difference at byte {}: got {:?}, want {:?}",
                name,
                got.len(),
                want.len(),
                at,
                got.get(at..(at + 16).min(got.len())),
                want.get(at..(at + 16).min(want.len()))
            );
        }
    }
}

/// Little-endian bytes of `vals` in the front of `buf`.
fn f32_bytes<'a>(vals: &[f32], buf: &'a mut [u8]) -> &'a [u8] {
    for (v, d) in vals.iter().zip(buf.chunks_exact_mut(4)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
    &buf[..4 * vals.len()]
}

fn u16_bytes<'a>(vals: &[u16], buf: &'a mut [u8]) -> &'a [u8] {
    for (v, d) in vals.iter().zip(buf.chunks_exact_mut(2)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
    &buf[..2 * vals.len()]
}

fn stats(t: &mut Tally, name: &str, dtype: DType, data: &[u8], elems: usize) -> Summary {
    match summarize(dtype, data, elems) {
        Ok(Some(s)) => s,
        other => {
            t.check(name, false);
            hprintln!("  summarize gave {:?}", other);
            Summary::EMPTY
        }
    }
}

/// MindSpore's statistic known answers (from its own tests) and a few dtype/NaN cases.
pub fn stats_kat(t: &mut Tally) {
    let mut buf = [0u8; 256];
    let s = stats(
        t,
        "stats [[1,2,3],[4,5,6]]",
        DType::Float32,
        f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut buf),
        6,
    );
    t.check_str("[[1..6]] max", g(s.max_value()).as_str(), "6");
    t.check_str("[[1..6]] min", g(s.min_value()).as_str(), "1");
    t.check_str("[[1..6]] avg", g(s.avg()).as_str(), "3.5");
    t.check_str("[[1..6]] l2norm", g(s.l2norm()).as_str(), "9.53939");
    t.check("[[1..6]] count", s.count == 6 && s.pos == 6 && s.zero == 0);

    let s = stats(
        t,
        "stats [[7..12]]",
        DType::Float32,
        f32_bytes(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &mut buf),
        6,
    );
    t.check_str("[[7..12]] l2norm", g(s.l2norm()).as_str(), "23.6432");

    let s = stats(
        t,
        "stats ones(32,2)",
        DType::Float32,
        f32_bytes(&[1.0; 64], &mut buf),
        64,
    );
    t.check_str("ones(32,2) l2norm", g(s.l2norm()).as_str(), "8");
    t.check("ones(32,2) count", s.count == 64);

    let s = stats(
        t,
        "stats with NaN/inf/-0",
        DType::Float32,
        f32_bytes(&[1.0, f32::NAN, -0.0, f32::NEG_INFINITY, 3.0], &mut buf),
        5,
    );
    t.check_str("NaN max", g(s.max_value()).as_str(), "nan");
    t.check_str("NaN l2norm", g(s.l2norm()).as_str(), "nan");
    t.check(
        "NaN counts",
        s.nan == 1 && s.zero == 1 && s.neg == 1 && s.neg_inf == 1 && s.pos == 2,
    );

    // f16 [1, 2, -0.5] and bf16 [1, 2, -0.5].
    let s = stats(
        t,
        "stats f16",
        DType::Float16,
        u16_bytes(&[0x3c00, 0x4000, 0xb800], &mut buf),
        3,
    );
    t.check_str("f16 max", g(s.max_value()).as_str(), "2");
    t.check_str("f16 min", g(s.min_value()).as_str(), "-0.5");
    let s = stats(
        t,
        "stats bf16",
        DType::BFloat16,
        u16_bytes(&[0x3f80, 0x4000, 0xbf00], &mut buf),
        3,
    );
    t.check_str("bf16 max", g(s.max_value()).as_str(), "2");
    t.check_str("bf16 l2norm", g(s.l2norm()).as_str(), "2.29129");

    t.check(
        "empty tensor has no statistics",
        matches!(summarize(DType::Float32, &[], 0), Ok(None)),
    );
    t.check(
        "length mismatch is an error",
        matches!(
            summarize(DType::Float32, &[0; 7], 2),
            Err(Error::LengthMismatch {
                expected: 8,
                actual: 7
            })
        ),
    );
}

/// Widening known answers: exact bits, NaN payloads, packed types and their last byte.
pub fn widen_kat(t: &mut Tally) {
    let mut src = [0u8; 16];
    let mut out = [0u8; 32];
    let words = |out: &[u8], i: usize| {
        u32::from_le_bytes([out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]])
    };

    let s = u16_bytes(&[0x3f80, 0xffc1, 0x0001], &mut src);
    t.check("bf16 widen len", bf16_to_f32(s, &mut out) == Ok(12));
    t.check(
        "bf16 widen bits",
        words(&out, 0) == 0x3f80_0000
            && words(&out, 1) == 0xffc1_0000
            && words(&out, 2) == 0x1_0000,
    );

    // 1.0, smallest subnormal, signalling NaN with sign and payload, 65504, -inf.
    let s = u16_bytes(&[0x3c00, 0x0001, 0xfd55, 0x7bff, 0xfc00], &mut src);
    t.check("f16 widen len", f16_to_f32(s, &mut out) == Ok(20));
    t.check("f16 1.0", words(&out, 0) == 0x3f80_0000);
    t.check_str(
        "f16 subnormal",
        g(f64::from(f32::from_bits(words(&out, 1)))).as_str(),
        "5.96046e-08",
    );
    t.check("f16 sNaN payload", words(&out, 2) == 0xffaa_a000);
    t.check_str(
        "f16 max",
        g(f64::from(f32::from_bits(words(&out, 3)))).as_str(),
        "65504",
    );
    t.check("f16 -inf", words(&out, 4) == 0xff80_0000);
    t.check(
        "odd f16 length is an error",
        f16_to_f32(&[0; 3], &mut out)
            == Err(Error::Misaligned {
                len: 3,
                multiple: 2,
            }),
    );

    let mut i8s = [0u8; 4];
    t.check(
        "int4 len",
        int4_to_int8(&[0xf1, 0x87], 3, &mut i8s) == Ok(3),
    );
    t.check("int4 values", i8s[..3] == [1, 0xff, 7]);
    let mut u8s = [9u8; 12];
    t.check(
        "uint1 len",
        uint1_to_uint8(&[0b1011_0001, 0b1100_0000], 11, &mut u8s) == Ok(11),
    );
    t.check(
        "uint1 last partial byte",
        u8s == [1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 9],
    );
}

/// MD5 (RFC 1321) and MindSpore SHA-1 known answers, streamed and whole.
pub fn hash_kat(t: &mut Tally) {
    t.check_str(
        "md5 empty",
        hex(&md5(b"")).as_str(),
        "d41d8cd98f00b204e9800998ecf8427e",
    );
    t.check_str(
        "md5 abc",
        hex(&md5(b"abc")).as_str(),
        "900150983cd24fb0d6963f7d28e17f72",
    );
    let mut m = Md5Stream::new();
    m.update(b"The quick brown ");
    m.update(b"fox jumps over the lazy dog");
    t.check_str(
        "md5 streamed",
        hex(&m.finish()).as_str(),
        "9e107d9d372bb6826bd81d3542a419d6",
    );
    t.check_str(
        "sha1 abc",
        hex(&ms_sha1(DType::Int8, b"abc", 3)).as_str(),
        "a9993e364706816aba3e25717850c26c9cd0d89d",
    );
    // 20480 zero int8: plain SHA-1. 20481: SHA-1 of the two slices' hex digests (answers from
    // python3 hashlib).
    let zeros = [0u8; 1000];
    for (elems, want) in [
        (20480usize, "963ff6c2d517d188014d2ef3682c4797888e6d26"),
        (20481, "8adbbc42c9ceca24ddf43c9d7a4ea7e8d2d3d6b0"),
    ] {
        let mut s = MsSha1::new(DType::Int8, elems);
        let mut left = elems;
        while left > 0 {
            let n = left.min(zeros.len());
            s.update(&zeros[..n]);
            left -= n;
        }
        t.check_str("sha1 zeros", hex(&s.finish()).as_str(), want);
    }
}

/// `%g` and count formatting known answers (glibc's output).
pub fn fmt_kat(t: &mut Tally) {
    let cases: [(f64, &str); 16] = [
        (1e6, "1e+06"),
        (1e-5, "1e-05"),
        (65504.0, "65504"),
        (9.539392014169456, "9.53939"),
        (0.0, "0"),
        (-0.0, "-0"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
        (-f64::NAN, "-nan"),
        (f64::MAX, "1.79769e+308"),
        (5e-324, "4.94066e-324"),
        (999999.5, "1e+06"),
        (0.0001, "0.0001"),
        (0.000123456789, "0.000123457"),
        (123456.0, "123456"),
    ];
    for (v, want) in cases {
        t.check_str("%g", g(v).as_str(), want);
    }
    t.check_str("u64", u64_str(u64::MAX).as_str(), "18446744073709551615");
    t.check_str("u64 0", u64_str(0).as_str(), "0");
}

/// A postcard record survives a COBS round trip on the device.
pub fn wire_kat(t: &mut Tally) {
    let mut buf = [0u8; 256];
    let s = match summarize(
        DType::Float32,
        f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut buf),
        6,
    ) {
        Ok(Some(s)) => s,
        _ => Summary::EMPTY,
    };
    let rec = match StatRecord::new(
        "Default--Add-op0",
        Io::Output,
        0,
        DType::Float32,
        &[2, 3],
        s,
    ) {
        Ok(mut r) => {
            r.md5 = Some(md5(b"abc"));
            r
        }
        Err(e) => {
            hprintln!("FAIL wire record: {}", e);
            t.failed += 1;
            return;
        }
    };
    let mut frame = [0u8; MAX_COBS_LEN];
    let n = match rec.encode_cobs(&mut frame) {
        Ok(b) => b.len(),
        Err(e) => {
            hprintln!("FAIL wire encode: {}", e);
            t.failed += 1;
            return;
        }
    };
    t.check("wire frame ends in 0", frame[n - 1] == 0);
    match StatRecord::decode_cobs(&mut frame[..n]) {
        Ok(back) => {
            t.check("wire round trip", back == rec);
            t.check_str("wire l2norm", g(back.summary.l2norm()).as_str(), "9.53939");
        }
        Err(e) => {
            hprintln!("FAIL wire decode: {}", e);
            t.failed += 1;
        }
    }

    // A session frame through the no_std decoder, on the device.
    t.check("crc32 check value", crc32(b"123456789") == 0xCBF4_3926);
    let stat = Frame::Stat(rec);
    let mut raw = [0u8; MAX_FRAME_LEN];
    let mut wire = [0u8; MAX_WIRE_LEN];
    let n = stat.build(5, &mut raw).unwrap_or(0);
    let w = encode_wire(&raw[..n], &mut wire).unwrap_or(0);
    t.check(
        "wire frame delimited",
        w > 2 && wire[0] == 0 && wire[w - 1] == 0,
    );
    let mut decoder = Decoder::new();
    let (mut good, mut bad) = (0, 0);
    decoder.push(&wire[..w], |e| match e {
        Event::Frame { seq: 5, frame, .. } if frame == stat => good += 1,
        _ => bad += 1,
    });
    wire[w / 2] ^= 0x01;
    decoder.push(&wire[..w], |e| match e {
        Event::Problem(_) => good += 1,
        Event::Frame { .. } => bad += 1,
    });
    t.check("wire decoder on device", good == 2 && bad == 0);
}

/// Runs every known-answer group and returns the tally.
pub fn run_all() -> Tally {
    let mut t = Tally::default();
    stats_kat(&mut t);
    widen_kat(&mut t);
    hash_kat(&mut t);
    fmt_kat(&mut t);
    wire_kat(&mut t);
    npy_kat(&mut t);
    csv_kat(&mut t);
    t
}
