//! `dump-npy`: MindSpore-exact .npy headers, a streaming writer that widens on the fly, and a hardened reader.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]
