//! `dump-npy`: `.npy` files exactly as MindSpore 2.10 writes them.
//!
//! - **Headers** byte-identical to MindSpore's ([`encode_header`], [`write_header`],
//!   [`header_len`]): `{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,), }`, every
//!   dimension followed by a comma, padding to 64 bytes that is never empty, version 2.0 above
//!   65535 bytes. Allocation-free and `no_std`.
//! - **A streaming writer** ([`write_npy`]) into any [`NpySink`] (slices, `Vec<u8>`, and any
//!   `std::io::Write` through [`IoSink`]) that widens on the fly through a fixed stack buffer:
//!   bf16 → `<f4` (default; [`Bf16Mode::Raw`] writes MindSpore CPU's `<E2`), int4 → `|i1`,
//!   uint1 → `|u1`, each with the logical shape.
//!   With `std`, [`write_to`] and [`write_file`] widen through a 1 MiB heap buffer instead,
//!   which keeps widened writes to files as fast as plain ones.
//! - **A chunked writer** ([`NpyStream`]) for tensors whose bytes arrive in pieces cut anywhere
//!   (a device copy): split bf16 elements wait for their second byte, int4 nibbles and uint1
//!   bits are unpacked per byte, and the file is byte-identical to the one-shot writer's.
//! - **A hardened reader** ([`parse_header`], [`read_npy`], and with `std` [`read_file`]) for
//!   npy versions 1.0, 2.0 and 3.0 in MindSpore's and numpy's styles, which returns errors,
//!   never panics and never allocates more than the input's real size; with `std`,
//!   [`NpyReader`] opens a file of any size and streams its data in [`CHUNK`]-byte pieces.
//!
//! ```
//! use dump_core::DType;
//! use dump_npy::{read_npy, write_npy, WriteOptions};
//!
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! let mut file = Vec::new();
//! write_npy(&mut file, DType::Float32, &[2, 3], &data, WriteOptions::default()).unwrap();
//! assert_eq!(&file[..10], b"\x93NUMPY\x01\x00\x76\x00");
//! assert!(file[10..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,), }"));
//!
//! let (header, bytes) = read_npy(&file).unwrap();
//! assert_eq!(header.dtype(), DType::Float32);
//! assert_eq!(header.dims().collect::<Vec<_>>(), [2, 3]);
//! assert_eq!(header.data_offset(), 128);
//! assert_eq!(bytes, &data[..]);
//! ```
//!
//! Features: `std` (default; `std::io` sinks and file helpers), `alloc` (`Vec<u8>` sink),
//! `defmt` (`defmt::Format` on [`Error`], [`WriteOptions`], [`Bf16Mode`]) and `serde`
//! (serde derives on [`WriteOptions`] and [`Bf16Mode`]).
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod error;
#[cfg(feature = "std")]
pub mod file;
pub mod header;
pub mod options;
pub mod read;
#[cfg(feature = "std")]
pub mod reader;
pub mod sink;
pub mod stream;
pub mod write;

pub use error::Error;
#[cfg(feature = "std")]
pub use file::{
    FILE_SCRATCH_LEN, NpyFile, read_file, read_file_opaque, read_from, write_file, write_to,
};
pub use header::{MAGIC, MAX_HEADER_LEN, MAX_RANK, encode_header, header_len, write_header};
pub use options::{Bf16Mode, WriteOptions};
pub use read::{
    Dims, Header, header_len_from_prefix, opaque_carrier, parse_header, parse_header_opaque,
    read_npy,
};
#[cfg(feature = "std")]
pub use reader::{CHUNK, FileError, FileErrorKind, NpyReader};
#[cfg(feature = "std")]
pub use sink::IoSink;
pub use sink::{NpySink, SliceSink};
pub use stream::NpyStream;
pub use write::{MIN_SCRATCH_LEN, NpyLayout, SCRATCH_LEN, write_npy, write_npy_with_scratch};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;
