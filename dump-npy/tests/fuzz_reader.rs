//! Proptest-driven fuzzing of the reader: random bytes, and valid headers (MindSpore and numpy
//! style) mutated by byte flips, insertions of header tokens, deletions, truncations and
//! length-field rewrites. The reader must never panic, and whatever it accepts must be
//! self-consistent and survive a round trip through the MindSpore encoder.
//!
//! Cases per property: `OPDUMP_FUZZ_CASES` (default 20000). A long local run:
//! `OPDUMP_FUZZ_CASES=1000000 cargo test --release -p dump-npy --test fuzz_reader`.

use std::cell::Cell;

use dump_core::DType;
use dump_npy::{Header, encode_header, header_len, parse_header, read_from, read_npy};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("OPDUMP_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Everything an accepted header promises, checked against an independent recomputation.
fn check_accepted(bytes: &[u8], h: &Header<'_>) {
    assert!(h.data_offset() <= bytes.len());
    assert!(matches!(h.version(), 1..=3));
    assert_eq!(DType::from_npy_descr(h.descr()), Some(h.dtype()));
    let dims: Vec<usize> = h.dims().collect();
    assert_eq!(dims.len(), h.rank());
    let elems = if dims.contains(&0) {
        0
    } else {
        dims.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .expect("accepted shapes do not overflow")
    };
    assert_eq!(h.elems(), elems);
    assert_eq!(
        Some(h.data_len()),
        elems.checked_mul(h.dtype().size().unwrap())
    );
    // Canonical re-encoding parses to the same dtype and shape.
    let n = header_len(h.descr(), &dims).unwrap();
    let mut again = vec![0u8; n];
    encode_header(h.descr(), &dims, &mut again).unwrap();
    let h2 = parse_header(&again).unwrap();
    assert_eq!(
        (h2.dtype(), h2.dims().collect::<Vec<_>>()),
        (h.dtype(), dims)
    );
}

/// Runs every reader entry point on `bytes`; none may panic. Returns whether the header was
/// accepted.
fn exercise(bytes: &[u8]) -> bool {
    let accepted = parse_header(bytes)
        .map(|h| check_accepted(bytes, &h))
        .is_ok();
    if let Ok((h, data)) = read_npy(bytes) {
        assert_eq!(data.len(), h.data_len());
    }
    if let Ok(f) = read_from(&mut &bytes[..], bytes.len() as u64) {
        assert_eq!(f.data.len() + f.data_offset, bytes.len());
    }
    accepted
}

fn descr() -> impl Strategy<Value = &'static str> {
    prop::sample::select(
        DType::ALL
            .iter()
            .filter_map(|d| d.npy_descr())
            .chain(["f4", "=i8", "|u1", "?", ">f4", "<U3", "O"])
            .collect::<Vec<_>>(),
    )
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..4, 0usize..100_000, any::<usize>()]
}

/// A valid-looking header: MindSpore's encoder, or numpy-style text with free formatting.
fn seed() -> impl Strategy<Value = Vec<u8>> {
    let mindspore = (descr(), prop::collection::vec(dim(), 0..9)).prop_map(|(d, shape)| {
        let d = if d.contains('\'') { "<f4" } else { d };
        let n = header_len(d, &shape).unwrap();
        let mut v = vec![0u8; n];
        encode_header(d, &shape, &mut v).unwrap();
        v
    });
    let numpy = (
        descr(),
        any::<bool>(),
        prop::collection::vec(dim(), 0..9),
        0usize..3,
        1u8..4,
        0usize..70,
    )
        .prop_map(|(d, fortran, shape, order, version, pad)| {
            let dims = shape.iter().map(usize::to_string).collect::<Vec<_>>();
            let shape_text = match dims.len() {
                1 => format!("({},)", dims[0]),
                _ => format!("({})", dims.join(", ")),
            };
            let f = if fortran { "True" } else { "False" };
            let entries = [
                format!("'descr': '{d}'"),
                format!("'fortran_order': {f}"),
                format!("'shape': {shape_text}"),
            ];
            let dict = match order {
                0 => format!("{{{}, {}, {}, }}", entries[0], entries[1], entries[2]),
                1 => format!("{{{}, {}, {}}}", entries[2], entries[0], entries[1]),
                _ => format!("{{ {} ,{} , {} }}", entries[1], entries[2], entries[0]),
            };
            let text = format!("{dict}{}\n", " ".repeat(pad));
            let mut v = b"\x93NUMPY".to_vec();
            v.push(version);
            v.push(0);
            if version == 1 {
                v.extend_from_slice(&(text.len() as u16).to_le_bytes());
            } else {
                v.extend_from_slice(&(text.len() as u32).to_le_bytes());
            }
            v.extend_from_slice(text.as_bytes());
            v
        });
    prop_oneof![mindspore, numpy]
}

const TOKENS: &[&[u8]] = &[
    b"'",
    b"\"",
    b"(",
    b")",
    b",",
    b":",
    b"{",
    b"}",
    b" ",
    b"\n",
    b"True",
    b"False",
    b"0",
    b"00",
    b"18446744073709551616",
    b"99999999999999999999",
    b"'descr'",
    b"'shape'",
    b"'fortran_order'",
    b"\\",
    b"\xff",
    b"[",
    b"-1",
    b"\x00",
];

#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    Insert { at: usize, token: usize },
    Delete { at: usize, len: usize },
    Truncate { at: usize },
    LengthField { value: u32 },
    AppendData { len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        3 => (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        2 => (any::<usize>(), 1usize..8).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        1 => any::<u32>().prop_map(|value| Mutation::LengthField { value }),
        2 => (0usize..300).prop_map(|len| Mutation::AppendData { len }),
    ]
}

fn apply(mut v: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let len = v.len();
        match *m {
            Mutation::Flip { at, xor } if len > 0 => v[at % len] ^= xor,
            Mutation::Insert { at, token } => {
                let at = at % (len + 1);
                v.splice(at..at, TOKENS[token].iter().copied());
            }
            Mutation::Delete { at, len: n } if len > 0 => {
                let at = at % len;
                v.drain(at..(at + n).min(len));
            }
            Mutation::Truncate { at } => v.truncate(at % (len + 1)),
            Mutation::LengthField { value } if len >= 12 => {
                if v[6] == 1 {
                    v[8..10].copy_from_slice(&(value as u16).to_le_bytes());
                } else {
                    v[8..12].copy_from_slice(&value.to_le_bytes());
                }
            }
            Mutation::AppendData { len: n } => v.extend(std::iter::repeat_n(0xA5, n)),
            _ => {}
        }
    }
    v
}

/// Mutated valid headers, driven by a hand-held runner so the accept/reject split can be
/// checked: a fuzzer that only ever sees rejections tests little.
#[test]
fn mutated_headers_never_panic() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let (accepted, total) = (Cell::new(0u64), Cell::new(0u64));
    let strategy = (seed(), prop::collection::vec(mutation(), 0..6));
    let start = std::time::Instant::now();
    runner
        .run(&strategy, |(base, muts)| {
            let bytes = apply(base, &muts);
            total.set(total.get() + 1);
            accepted.set(accepted.get() + u64::from(exercise(&bytes)));
            Ok(())
        })
        .unwrap();
    let (accepted, total) = (accepted.get(), total.get());
    println!(
        "mutated headers: {total} inputs, {accepted} accepted, {} rejected, {:.1}s",
        total - accepted,
        start.elapsed().as_secs_f64()
    );
    assert!(
        accepted > total / 20 && accepted < total,
        "{accepted} of {total}"
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(
        prefix in prop::bool::ANY,
        tail in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = if prefix { b"\x93NUMPY\x01\x00".to_vec() } else { Vec::new() };
        bytes.extend_from_slice(&tail);
        let _ = exercise(&bytes);
    }

    #[test]
    fn encoder_round_trips(
        d in prop::sample::select(DType::ALL.to_vec()),
        shape in prop::collection::vec(dim(), 0..12),
    ) {
        let Some(descr) = d.npy_descr() else { return Ok(()) };
        let n = header_len(descr, &shape).unwrap();
        prop_assert_eq!(n % 64, 0);
        let mut v = vec![0u8; n];
        prop_assert_eq!(encode_header(descr, &shape, &mut v), Ok(n));
        match parse_header(&v) {
            Ok(h) => {
                prop_assert_eq!(h.dtype(), d);
                prop_assert_eq!(h.data_offset(), n);
                prop_assert_eq!(h.dims().collect::<Vec<_>>(), shape);
            }
            // Shapes whose byte size overflows usize are refused, never misread.
            Err(e) => {
                prop_assert_eq!(e, dump_npy::Error::ShapeOverflow);
                let nonzero = shape.iter().filter(|&&x| x != 0).try_fold(1usize, |a, &x| a.checked_mul(x));
                let bytes = if shape.contains(&0) { Some(0) } else { nonzero.and_then(|e| e.checked_mul(d.size().unwrap())) };
                prop_assert!(nonzero.is_none() || bytes.is_none() || bytes.unwrap().checked_add(n).is_none());
            }
        }
    }
}
