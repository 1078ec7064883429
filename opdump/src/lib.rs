//! `opdump`: the command-line tool of the opdump workspace (`check`, `demo`, `stats`) and the
//! LeNet-5 demo workload. The library a runtime embeds is [`dump_host`]; this crate only parses
//! arguments, prints and runs the demo.
//!
//! ```
//! let mut out = Vec::new();
//! let mut err = Vec::new();
//! let code = opdump::cli::run(["opdump", "--version"], &dump_host::config::ProcessEnv, &mut out, &mut err);
//! assert_eq!(code, opdump::cli::EXIT_OK);
//! assert!(String::from_utf8_lossy(&out).starts_with("opdump "));
//! ```
#![deny(missing_docs)]

pub mod cli;
pub mod demo;
