//! `dump-npy` known answers: MindSpore-exact headers, whole files with and without widening,
//! and the reader, all into stack buffers.
//!
//! The expected bytes come from MindSpore 2.10's own CPU dump (`shared/reference`,
//! `a_tensor_all_io0`: the `header_hex` column of `manifest.tsv` and the md5 of whole `.npy`
//! files) or, for headers MindSpore's test net never produces, from the header rule of the
//! spec (§5): `pad = 64 - ((11 + len(dict)) mod 64)`, never 0, and version 2.0 with a u32
//! length and `pad = 64 - ((13 + len(dict)) mod 64)` once `11 + len(dict) > 65535`.

use crate::{Tally, u16_bytes};
use cortex_m_semihosting::hprintln;
use dump_core::{
    DType,
    hash::{hex, md5},
};
use dump_npy::{
    Error, SliceSink, WriteOptions, encode_header, header_len, read_npy, write_header, write_npy,
    write_npy_with_scratch,
};

/// Magic, version 1.0 and HLEN 118 (`0x76`): the first 10 bytes of every 128-byte header in
/// the reference dump.
const PREFIX_128: &[u8] = b"\x93NUMPY\x01\x00\x76\x00";

/// Headers MindSpore 2.10 wrote in the reference dump: descr, shape and the dict text
/// (`header_text` of `manifest.tsv` without its padding). Each header is 128 bytes.
const REFERENCE_HEADERS: [(&str, &[usize], &str); 6] = [
    (
        "<f4",
        &[2, 5],
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,5,), }",
    ),
    (
        "<f4",
        &[2, 1, 8, 8],
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,1,8,8,), }",
    ),
    (
        "<f2",
        &[2, 5],
        "{'descr': '<f2', 'fortran_order': False, 'shape': (2,5,), }",
    ),
    (
        "|b1",
        &[],
        "{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
    ),
    (
        "<i8",
        &[2],
        "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
    ),
    (
        "<E2",
        &[2, 5],
        "{'descr': '<E2', 'fortran_order': False, 'shape': (2,5,), }",
    ),
];

/// The input of MindSpore's `Cast-op3` (bf16, shape (2,5)) in the reference dump, iteration 0:
/// the data bytes of
/// `Cast.Default_network-WithLossCell__backbone-TinyNet_Cast-op3.0.0.1795332152780038.input.0.DefaultFormat.BFloat16.npy`.
pub(crate) const CAST_BF16: [u16; 10] = [
    0x4080, 0x404f, 0x4024, 0x3ffa, 0x3fb9, 0x4080, 0x404f, 0x4023, 0x3ffa, 0x3fb7,
];

/// md5 of that whole file (148 bytes: `<E2` header + raw bf16, MindSpore CPU's layout).
const CAST_BF16_FILE_MD5: &str = "b280d2d1dc260761b289947d70f88665";

/// md5 of the whole file of `Cast-op3`'s output (168 bytes: `<f4` header + float32), i.e.
/// MindSpore's own exact bf16 -> f32 conversion of the same values, which is what the widening
/// writer must produce.
const CAST_F32_FILE_MD5: &str = "939975bd95e1c69dceb29ec84b7c3471";

/// Rank of the smallest all-ones `<f4` shape whose header needs version 2.0 (dict of 65525
/// bytes); one less still fits version 1.0 with the largest HLEN, 65526.
const V2_RANK: usize = 32735;

/// The shape `(1,1,...,1,)` of rank [`V2_RANK`], in flash.
static ONES: [usize; V2_RANK] = [1; V2_RANK];

/// The exact header: `prefix` (magic, version, HLEN), `dict`, spaces up to byte `total - 1`,
/// then `\n`, in the front of `buf`.
fn header_bytes<'a>(prefix: &[u8], dict: &[u8], total: usize, buf: &'a mut [u8]) -> &'a [u8] {
    let end = prefix.len() + dict.len();
    buf[..prefix.len()].copy_from_slice(prefix);
    buf[prefix.len()..end].copy_from_slice(dict);
    buf[end..total - 1].fill(b' ');
    buf[total - 1] = b'\n';
    &buf[..total]
}

/// Runs every dump-npy known answer.
pub fn npy_kat(t: &mut Tally) {
    reference_headers(t);
    padding_and_version_2(t);
    whole_files(t);
    errors(t);
}

/// The six reference headers through all three encoders: the length alone, into a slice, and
/// streamed into a sink.
fn reference_headers(t: &mut Tally) {
    for (descr, shape, dict) in REFERENCE_HEADERS {
        let failed = t.failed;
        let mut want = [0u8; 128];
        let want = header_bytes(PREFIX_128, dict.as_bytes(), 128, &mut want);
        t.check("header_len", header_len(descr, shape) == Ok(128));
        let mut got = [0u8; 160];
        match encode_header(descr, shape, &mut got) {
            Ok(n) => t.check_bytes("encode_header", &got[..n], want),
            Err(e) => {
                hprintln!("FAIL encode_header: {:?}", e);
                t.failed += 1;
            }
        }
        let mut buf = [0u8; 128];
        let mut sink = SliceSink::new(&mut buf);
        let n = write_header(&mut sink, descr, shape);
        t.check("write_header length", n == Ok(128));
        t.check_bytes("write_header into a SliceSink", sink.written(), want);
        if t.failed != failed {
            hprintln!("  (the FAIL lines above are for the header {})", dict);
        }
    }
}

/// MindSpore's padding is never empty (64 spaces when the header would already end on a
/// 64-byte boundary), and version 2.0 starts exactly where HLEN no longer fits a u16.
fn padding_and_version_2(t: &mut Tally) {
    // 11 + len(dict) = 128: a full 64 spaces of padding, 192 bytes, HLEN 182 (0xb6).
    let dict: &[u8] = b"{'descr': '<f4', 'fortran_order': False, 'shape': \
        (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,), }";
    let mut want = [0u8; 192];
    let want = header_bytes(b"\x93NUMPY\x01\x00\xb6\x00", dict, 192, &mut want);
    let mut got = [0u8; 192];
    let n = encode_header("<f4", &ONES[..31], &mut got);
    t.check("rank-31 header length", n == Ok(192));
    t.check_bytes("rank-31 header: 64 spaces of padding", &got, want);

    // Rank 32734: dict 65523 bytes, 2 spaces, 65536 bytes, HLEN 65526 (0xfff6), version 1.0.
    // Rank 32735: dict 65525 bytes, version 2.0, 62 spaces, 65600 bytes, HLEN 65588 (0x10034).
    t.check(
        "largest version 1.0 header",
        header_len("<f4", &ONES[..V2_RANK - 1]) == Ok(65536),
    );
    t.check(
        "smallest version 2.0 header",
        header_len("<f4", &ONES) == Ok(65600),
    );
    let mut got = [0u8; 65600];
    t.check(
        "largest version 1.0 header encodes",
        encode_header("<f4", &ONES[..V2_RANK - 1], &mut got) == Ok(65536),
    );
    t.check_bytes(
        "largest version 1.0 header: prefix",
        &got[..10],
        b"\x93NUMPY\x01\x00\xf6\xff",
    );
    t.check_bytes(
        "largest version 1.0 header: 2 spaces and the end",
        &got[65533..65536],
        b"  \n",
    );
    let mut dict = [0u8; 65525];
    let head = b"{'descr': '<f4', 'fortran_order': False, 'shape': (";
    dict[..head.len()].copy_from_slice(head);
    for pair in dict[head.len()..head.len() + 2 * V2_RANK].chunks_exact_mut(2) {
        pair.copy_from_slice(b"1,");
    }
    dict[head.len() + 2 * V2_RANK..].copy_from_slice(b"), }");
    let mut want = [0u8; 65600];
    let want = header_bytes(
        b"\x93NUMPY\x02\x00\x34\x00\x01\x00",
        &dict,
        65600,
        &mut want,
    );
    t.check(
        "smallest version 2.0 header encodes",
        encode_header("<f4", &ONES, &mut got) == Ok(65600),
    );
    t.check_bytes("smallest version 2.0 header", &got, want);
}

/// Whole files compared with MindSpore's (md5 of the file), widening through a tiny scratch
/// buffer so that every chunk boundary is crossed, and read back with the reader.
fn whole_files(t: &mut Tally) {
    let mut src = [0u8; 20];
    let bf16 = u16_bytes(&CAST_BF16, &mut src);

    // bf16 raw, MindSpore CPU's `<E2` file.
    let mut file = [0u8; 148];
    let mut sink = SliceSink::new(&mut file);
    let n = write_npy(
        &mut sink,
        DType::BFloat16,
        &[2, 5],
        bf16,
        WriteOptions::MINDSPORE_CPU,
    );
    t.check("bf16 raw file length", n == Ok(148));
    t.check_str(
        "bf16 raw file = MindSpore's",
        hex(&md5(sink.written())).as_str(),
        CAST_BF16_FILE_MD5,
    );
    match read_npy(&file) {
        Ok((h, data)) => {
            t.check(
                "read back <E2",
                h.version() == 1
                    && h.descr() == "<E2"
                    && h.dtype() == DType::BFloat16
                    && !h.fortran_order()
                    && h.dims().eq([2, 5])
                    && h.data_offset() == 128,
            );
            t.check_bytes("read back bf16 data", data, bf16);
        }
        Err(e) => {
            hprintln!("FAIL read_npy <E2: {:?}", e);
            t.failed += 1;
        }
    }

    // bf16 widened to `<f4`, 2 elements per chunk: MindSpore's own Cast to float32.
    let mut file = [0u8; 168];
    let mut sink = SliceSink::new(&mut file);
    let n = write_npy_with_scratch(
        &mut sink,
        DType::BFloat16,
        &[2, 5],
        bf16,
        WriteOptions::default(),
        &mut [0u8; 8],
    );
    t.check("bf16 widened file length", n == Ok(168));
    t.check_str(
        "bf16 widened file = MindSpore's Cast to float32",
        hex(&md5(sink.written())).as_str(),
        CAST_F32_FILE_MD5,
    );
    match read_npy(&file) {
        Ok((h, data)) => t.check(
            "read back widened",
            h.dtype() == DType::Float32 && data.len() == 40 && data[36..] == [0, 0, 0xb7, 0x3f],
        ),
        Err(e) => {
            hprintln!("FAIL read_npy <f4: {:?}", e);
            t.failed += 1;
        }
    }

    // int4 [1, -1, 7] -> `|i1`, and uint1 (11 elements, MSB first) -> `|u1`, 8 per chunk.
    let mut want = [0u8; 131];
    header_bytes(
        PREFIX_128,
        b"{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }",
        128,
        &mut want,
    );
    want[128..].copy_from_slice(&[1, 0xff, 7]);
    let mut file = [0u8; 131];
    let mut sink = SliceSink::new(&mut file);
    let n = write_npy_with_scratch(
        &mut sink,
        DType::Int4,
        &[3],
        &[0xf1, 0x87],
        WriteOptions::default(),
        &mut [0u8; 8],
    );
    t.check("int4 file length", n == Ok(131));
    t.check_bytes("int4 file", sink.written(), &want);

    let mut want = [0u8; 139];
    header_bytes(
        PREFIX_128,
        b"{'descr': '|u1', 'fortran_order': False, 'shape': (11,), }",
        128,
        &mut want,
    );
    want[128..].copy_from_slice(&[1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0]);
    let mut file = [0u8; 139];
    let mut sink = SliceSink::new(&mut file);
    let n = write_npy_with_scratch(
        &mut sink,
        DType::UInt1,
        &[11],
        &[0b1011_0001, 0b1100_0000],
        WriteOptions::default(),
        &mut [0u8; 8],
    );
    t.check("uint1 file length", n == Ok(139));
    t.check_bytes("uint1 file", sink.written(), &want);
}

/// Errors instead of overruns: short buffers and sinks, and data of the wrong length.
fn errors(t: &mut Tally) {
    let too_small = |needed, available| {
        Err(Error::Core(dump_core::Error::BufferTooSmall {
            needed,
            available,
        }))
    };
    t.check(
        "header into 100 bytes",
        encode_header("<f4", &[2, 5], &mut [0u8; 100]) == too_small(128, 100),
    );
    let mut src = [0u8; 20];
    let bf16 = u16_bytes(&CAST_BF16, &mut src);
    let mut file = [0u8; 140];
    let n = write_npy(
        &mut SliceSink::new(&mut file),
        DType::BFloat16,
        &[2, 5],
        bf16,
        WriteOptions::MINDSPORE_CPU,
    );
    t.check("148-byte file into 140 bytes", n == too_small(148, 140));
    let n = write_npy(
        &mut SliceSink::new(&mut file),
        DType::Float32,
        &[2, 3],
        bf16,
        WriteOptions::default(),
    );
    t.check(
        "20 bytes for a (2,3) float32 tensor",
        n == Err(Error::Core(dump_core::Error::LengthMismatch {
            expected: 24,
            actual: 20,
        })),
    );
    let n = write_npy_with_scratch(
        &mut SliceSink::new(&mut file),
        DType::Int4,
        &[3],
        &[0xf1, 0x87],
        WriteOptions::default(),
        &mut [0u8; 7],
    );
    t.check("widening scratch below 8 bytes", n == too_small(8, 7));
}
