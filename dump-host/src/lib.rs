//! `dump-host`: opdump on a host with `std`: the MindSpore `data_dump.json` config
//! ([`config`]), and the `opdump` command-line tool's logic ([`cli`]).
#![deny(missing_docs)]

pub mod config;
mod dumper;
pub mod error;
pub mod graph;
pub mod layout;
pub mod writer;

pub use dumper::{
    DeviceTensor, DumpOptions, DumpPlan, DumpReport, Dumper, Kernel, MS_VERSION, Step, TensorRef,
};
pub use error::Error;
