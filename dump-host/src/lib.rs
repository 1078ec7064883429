//! `dump-host`: opdump on a host with `std`: the MindSpore `data_dump.json` config
//! ([`config`]), and the `opdump` command-line tool's logic ([`cli`]).
#![deny(missing_docs)]

pub mod cli;
pub mod config;
pub mod error;

pub use error::Error;
