//! A device agent's saved frame stream (`docs/wire.md`): one file (`*.opstream`, or any file
//! that starts with a frame, such as `cargo xtask agent-qemu`'s `agent-stream.bin`) or a
//! directory holding `*.opstream` files, read straight into [`TensorRecord`]s whose row
//! statistics are the agent's [`Summary`](dump_core::Summary) (and MD5), so `opdump inspect`
//! and `opdump compare` take a device run as they take a dump directory.
//!
//! Records are numbered in stream order (the timestamp field: the agent sends no clock), the
//! execution order comes from the begin-graph / kernel frames, and every decoder problem (torn,
//! corrupt, duplicated, reordered, over-long frame) becomes a [`Problem`] naming the file and
//! the byte offset; reading goes on after it. Files are read in 64 KiB pieces, never whole.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use dump_core::wire::{Decoder, Event, Frame, Io as WireIo, StatRecord};
use dump_stats::{Io, TensorId, TensorStats, names::sanitize};

use super::Dialect;
use crate::{Dump, Error, Problem, Stats, TensorRecord};

/// File extension of a saved stream in a directory.
const EXT: &str = "opstream";

/// The stream dialect.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stream;

impl Dialect for Stream {
    fn name(&self) -> &'static str {
        "stream"
    }

    fn describe(&self) -> &'static str {
        "a device agent's frame stream (a file starting with a frame, or a directory of *.opstream files)"
    }

    fn detect(&self, root: &Path) -> bool {
        match std::fs::metadata(root) {
            Ok(m) if m.is_file() => starts_with_frame(root),
            Ok(m) if m.is_dir() => !stream_files(root).is_empty(),
            _ => false,
        }
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let files = if std::fs::metadata(root)
            .map_err(|e| Error::io(root, e))?
            .is_file()
        {
            vec![root.to_owned()]
        } else {
            stream_files(root)
        };
        let mut dump = Dump {
            root: root.to_owned(),
            dialect: self.name(),
            tensors: Vec::new(),
            execution_orders: Vec::new(),
            graphs: Vec::new(),
            problems: Vec::new(),
        };
        let mut ts = 0u64;
        for (rank, f) in files.iter().enumerate() {
            // One stream per file; each file is one agent, numbered as a rank.
            read_file(f, rank as u32, &mut ts, &mut dump).map_err(|e| Error::io(f, e))?;
        }
        Ok(dump)
    }
}

/// `*.opstream` files directly in `dir`, sorted.
fn stream_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == EXT))
        .collect();
    v.sort();
    v
}

/// Whether the first KiB of `path` decodes to a frame (cheap; `false` on any error).
fn starts_with_frame(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = Vec::with_capacity(1024);
    if f.take(1024).read_to_end(&mut head).is_err() || head.first() != Some(&0) {
        return false;
    }
    let mut found = false;
    Decoder::new().push(&head, |e| found |= matches!(e, Event::Frame { .. }));
    found
}

/// Decodes one stream file into `dump`.
fn read_file(path: &Path, rank: u32, ts: &mut u64, dump: &mut Dump) -> std::io::Result<()> {
    let mut f = std::fs::File::open(path)?;
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut on_event = |e: Event| match e {
        Event::Problem(p) => dump.problems.push(Problem {
            path: path.to_owned(),
            message: format!(
                "offset {}: {:?} ({} bytes skipped; see docs/wire.md section 6)",
                p.offset, p.kind, p.len
            ),
        }),
        Event::Frame { frame, .. } => match frame {
            Frame::Stat(r) => {
                *ts += 1;
                dump.tensors.push(record(&r, rank, *ts));
            }
            Frame::BeginGraph(g) => {
                dump.execution_orders
                    .retain(|(k, _)| *k != (rank, g.graph_id));
                dump.execution_orders.push(((rank, g.graph_id), Vec::new()));
            }
            Frame::Kernel(k) => {
                if let Some((_, names)) = dump
                    .execution_orders
                    .iter_mut()
                    .find(|(key, _)| *key == (rank, k.graph_id))
                {
                    names.push(row_name(&k.op));
                }
            }
            _ => {}
        },
    };
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        decoder.push(&buf[..n], &mut on_event);
    }
    decoder.finish(&mut on_event);
    Ok(())
}

/// An op name as the MindSpore layout spells it in a row.
fn row_name(op: &str) -> String {
    sanitize(op).replace(',', "_")
}

/// The record of one stat frame.
fn record(r: &StatRecord, rank: u32, ts: u64) -> TensorRecord {
    let stats = TensorStats {
        summary: Some(r.summary),
        md5: r.md5,
        sha1: None,
    };
    TensorRecord {
        rank,
        net: String::new(),
        graph: r.graph_id,
        iteration: u64::from(r.iteration),
        id: TensorId {
            op_type: row_name(&r.op_type),
            op_name: row_name(&r.op),
            task_id: 0,
            stream_id: 0,
            timestamp: ts,
            io: match r.io {
                WireIo::Input => Io::Input,
                WireIo::Output => Io::Output,
            },
            slot: r.slot,
        },
        dtype: r.dtype,
        shape: r.shape.iter().map(|&d| d as usize).collect(),
        file: None,
        stored: None,
        row_stats: Some(Stats::from_tensor_stats(&stats)),
    }
}
