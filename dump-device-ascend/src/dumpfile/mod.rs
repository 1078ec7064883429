//! CANN operator dump files (`{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`), the
//! files Ascend's GE / acl.json dump writes: the container, the `DumpData` message, data types,
//! formats and overflow blocks (`shared/spec/cann-dump.md`). The module opens no files: it
//! decodes a whole file from `&[u8]` ([`decode`]) or streams it from any [`std::io::Read`]
//! ([`DumpReader`], with [`DumpReader::seek_tensor`] for random access when the source is also
//! [`std::io::Seek`]), and writes files of either variant ([`encode`], [`encode_message`] for a
//! streaming writer); the reading crate and `opdump convert` sit on top.
//!
//! The encoder writes what the `protobuf` package writes (field-number order, proto3
//! defaults left out, packed dims): the tests check it byte for byte against the generated
//! fixtures.
//!
//! # The container (spec §1)
//!
//! - **v2, "binary"** (every current writer): `u64` message length `L` (little-endian), `L`
//!   bytes of `DumpData`, then the tensor bytes: every input, output, buffer, workspace in that
//!   order, each exactly its `size`, no padding. Trailing bytes after the last payload are
//!   allowed and reported ([`DumpHeader::payload_end`]).
//! - **v1, "protobuf"** (old): the file is one `DumpData`, each tensor's bytes in its `data`
//!   field. [`TensorMeta::offset`] then points into the message, so both variants are read the
//!   same way.
//!   In v2 any `data` field is ignored (writers leave it empty); in v1 the `size` field is
//!   replaced by the `data` field's length.
//! - **"nano" TLV** (`0x5A5A5A5A` at offset 8) is recognised and refused
//!   ([`DumpFileError::NanoContainer`]): the spec does not give its records.
//!
//! Detection follows msaccucmp: a file of 8 bytes or less is an error; the nano magic; then v2
//! if `L` fits, the message decodes and every payload ends within the file; else v1 if the
//! whole file decodes as a message whose version is not `"2.0"`; else the v2 error (or the v1
//! error when the header's length did not fit and the file starts like a message, `0x0A`).
//!
//! # Bounds
//!
//! Nothing is allocated from a declared count: vectors grow only with records actually
//! decoded, and [`Limits`] bounds the message length (held in memory), the number of tensors,
//! the rank and the nesting depth. A 10 GiB v2 file is streamed with its message plus the
//! caller's chunk buffer in memory.
//!
//! # Protobuf
//!
//! The wire format is read by a small reader written here (`wire.rs`, about 200 lines):
//! varints (at most 10 bytes, no bits beyond 64), fixed32/64, length-delimited fields, unknown
//! fields skipped, packed and unpacked repeated dims, groups and field number 0 refused. `prost`
//! needs `protoc` at build time (the workspace must build with rustup alone); `quick-protobuf`
//! without code generation would still need the same hand-written per-field decoding, and
//! could not report the file offset of each field or of a v1 `data` field, which the errors
//! and the v1 payload offsets rely on. A known field with another wire type than the spec's is
//! an error (naming both), not silently skipped.
//!
//! # Data types and formats
//!
//! [`CannDType`] and [`CannFormat`] keep the numbers of the file (values a newer CANN adds
//! survive), with the spec's names (§2.1, §2.2). [`CannDType::dtype`] gives the workspace
//! [`DType`](dump_core::DType) for FLOAT, FLOAT16, BF16, DOUBLE, the integers, BOOL, INT4,
//! UINT1, FLOAT8_E5M2, FLOAT8_E4M3FN and the complex types (float8 is written widened to
//! float32, as msaccucmp does); the others (HIFLOAT8, FLOAT8_E8M0, FP6, FP4, INT2, QINT*,
//! COMPLEX32, STRING, ...) have none and [`TensorMeta::dtype`] reports them by name. [`CannFormat::format`]
//! gives this crate's [`Format`](crate::Format) for NCHW, NHWC, ND, NC1HWC0, FRACTAL_Z and
//! FRACTAL_NZ.
//!
//! # Verified and inferred
//!
//! From the spec's sources **\[V\]**: the field numbers and types, the payload order and the
//! absence of padding, the dtype and format numbering, the overflow block's offsets and field
//! lists, the detection steps msaccucmp takes. **\[I\]** (inferred; the decoder's choice): the
//! header is little-endian (writers use host order; every shipped platform is LE); the
//! element widths [`CannDType::bits`] gives for types the workspace lacks (from their names);
//! v2 files with trailing bytes are accepted; the overflow JSON's nesting (each section's
//! fields, `status` inside its section) and the names `status0..3`, `AI Vector`, `AI CPU` and
//! `SDMA` of the new layout; `data_len` is accepted when it is at least 8 × the field count.
//! Strings are decoded lossily (invalid UTF-8 becomes U+FFFD), as op names are never refused.
//!
//! # Example
//!
//! ```
//! use dump_device_ascend::dumpfile::{CannDType, DumpReader, TensorKind, decode};
//!
//! // A v2 file: one FLOAT16 output of shape [2] (4 bytes), format ND.
//! let output = [0x08, 2, 0x10, 2, 0x1A, 3, 0x0A, 1, 2, 0x30, 4];
//! let mut msg = vec![0x1A, output.len() as u8];
//! msg.extend(output);
//! let mut file = (msg.len() as u64).to_le_bytes().to_vec();
//! file.extend(&msg);
//! file.extend([0x00, 0x3C, 0x00, 0xC0]); // 1.0, -2.0 in float16
//!
//! // From memory:
//! let h = decode(&file)?;
//! let t = h.tensor(TensorKind::Output, 0).unwrap();
//! assert_eq!((t.data_type, t.shape.as_slice(), t.size), (CannDType::FLOAT16, &[2u64][..], 4));
//! assert_eq!(t.format.name(), Some("ND"));
//! assert_eq!(t.dtype()?, dump_core::DType::Float16);
//! assert_eq!(t.bytes_in(&file), Some(&[0x00, 0x3C, 0x00, 0xC0][..]));
//!
//! // Streamed from any `Read`, in chunks of the caller's size:
//! let mut r = DumpReader::open(&file[..], file.len() as u64)?;
//! let mut chunk = [0u8; 3];
//! while let Some(t) = r.next_tensor()? {
//!     let (kind, index, size) = (t.kind, t.index, t.size);
//!     let mut got = Vec::new();
//!     loop {
//!         let n = r.read_chunk(&mut chunk)?;
//!         if n == 0 { break; }
//!         got.extend_from_slice(&chunk[..n]);
//!     }
//!     assert_eq!((kind, index, got.len() as u64), (TensorKind::Output, 0, size));
//! }
//! # Ok::<(), dump_device_ascend::dumpfile::DumpFileError>(())
//! ```

mod container;
mod dtype;
mod encode;
mod error;
mod format;
mod header;
mod message;
mod opdebug;
mod stream;
mod wire;

pub use container::{HEADER_LEN, NANO_MAGIC, decode, decode_with};
pub use dtype::CannDType;
pub use encode::{encode, encode_message};
pub use error::{DumpFileError, FieldPath, TensorId, WireProblem};
pub use format::CannFormat;
pub use header::{Container, DumpHeader, Limits, OpAttr, OriginalOp, TensorKind, TensorMeta};
pub use opdebug::{
    OLD_BLOCK_LEN, OPDEBUG_FILE_PREFIX, OPDEBUG_MAGIC, OverflowField, OverflowLayout,
    OverflowReport, OverflowSection, is_opdebug_file,
};
pub use stream::DumpReader;
