//! `dump-host`: opdump on a host with `std`.
#![deny(missing_docs)]

pub mod writer;
pub mod demo;
