//! Helpers for opdump's workspace tests (`tests/tests/*.rs`): temporary dump roots, tree
//! listing, the reference cases of MindSpore 2.10, a small TinyNet-like kernel sequence that
//! reports real tensors to a [`dump_host::Step`], `.npy` name parsing, and the hardening
//! campaign's seeded producer schedules, dump-tree invariants and soak.
#![deny(missing_docs)]

pub mod config;
pub mod csv;
pub mod fsutil;
pub mod invariants;
pub mod one_tensor;
pub mod reference;
pub mod schedule;
pub mod soak;
pub mod tinynet;
