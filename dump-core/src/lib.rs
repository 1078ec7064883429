//! `dump-core`: the `no_std`, allocation-free heart of opdump.
//!
//! It holds the vocabulary every other opdump crate speaks ([`DType`], [`Summary`]) and the
//! kernels that touch tensor bytes: widening ([`widen`]), one-pass statistics ([`stats`]),
//! hashes ([`hash`]), C `printf("%g")`-identical number formatting ([`fmt`]), iteration
//! matching ([`iteration`]), and for device agents (feature `serde`) the framed postcard wire
//! format with its host decoder (`wire`) and the agent that streams it (`agent`).
//!
//! Nothing here allocates. With the `std` feature (default) the statistics kernels pick the
//! fastest implementation for the running CPU at run time (AVX-512F/BW/VL, else AVX2/FMA/F16C
//! on x86-64); without it they use what the target enables at compile time.
//!
//! ```
//! use dump_core::{DType, stats::summarize, fmt::g};
//!
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
//!     .iter()
//!     .flat_map(|v| v.to_le_bytes())
//!     .collect();
//! let s = summarize(DType::Float32, &data, 6).unwrap().expect("non-empty tensor");
//! assert_eq!(g(s.max_value()).as_str(), "6");
//! assert_eq!(g(s.min_value()).as_str(), "1");
//! assert_eq!(g(s.l2norm()).as_str(), "9.53939");
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]

#[cfg(feature = "serde")]
pub mod agent;
pub mod compare;
pub mod dtype;
pub mod error;
pub mod fmt;
pub mod hash;
pub mod iteration;
pub mod stats;
pub mod widen;
#[cfg(feature = "serde")]
pub mod wire;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;

pub use dtype::DType;
pub use error::Error;
pub use stats::Summary;
