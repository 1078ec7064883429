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

use dump_core::wire::{Decoder, Event, Frame, Io as WireIo, ProblemKind, StatRecord};
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
            ..Dump::default()
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
            message: match p.kind {
                ProblemKind::Gap { expected, got } => format!(
                    "offset {}: Gap: frames lost before this one (seq {got}, expected \
                     {expected}); it was read",
                    p.offset
                ),
                k => format!(
                    "offset {}: {k:?} ({} bytes skipped; see docs/wire.md section 6)",
                    p.offset, p.len
                ),
            },
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
        source: None,
        stored: None,
        row_stats: Some(Stats::from_tensor_stats(&stats)),
        arg_name: None,
        unreadable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_core::{
        DType, Summary,
        wire::{BeginStep, MAX_FRAME_LEN, MAX_WIRE_LEN, frame},
    };

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("dump-read-stream-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn wire(frames: &[Frame]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, f) in frames.iter().enumerate() {
            let mut raw = [0u8; MAX_FRAME_LEN];
            let n = f.build(seq as u32, &mut raw).unwrap();
            let mut w = [0u8; MAX_WIRE_LEN];
            let m = frame::encode_wire(&raw[..n], &mut w).unwrap();
            out.extend_from_slice(&w[..m]);
        }
        out
    }

    fn stat(op: &str, it: u32, vals: &[f64]) -> Frame {
        let mut s = Summary::EMPTY;
        for &v in vals {
            s.push(v);
        }
        let n = vals.len() as u32;
        let mut r = StatRecord::new(op, WireIo::Output, 0, DType::Float32, &[n], s)
            .unwrap()
            .with_op_type("Add")
            .unwrap();
        r.iteration = it;
        Frame::Stat(r)
    }

    #[test]
    fn records_carry_the_agents_statistics_in_order() {
        let d = tmp("ok");
        let p = d.join("run.opstream");
        let frames = [
            Frame::BeginStep(BeginStep {
                graph_id: 0,
                iteration: 3,
            }),
            stat("Default/a,b-op0", 3, &[1.0, 2.0, f64::NAN]),
            stat("Default/c-op1", 3, &[-4.0]),
        ];
        std::fs::write(&p, wire(&frames)).unwrap();
        assert!(Stream.detect(&p) && Stream.detect(&d));
        for root in [&p, &d] {
            let dump = crate::Dump::open(root).unwrap();
            assert_eq!(dump.dialect, "stream");
            assert!(dump.problems.is_empty(), "{:?}", dump.problems);
            assert_eq!(dump.tensors.len(), 2);
            let t = &dump.tensors[0];
            // Spelled as the MindSpore layout spells the row (no '/' or ',').
            assert_eq!(t.id.op_name, "Default_a_b-op0");
            assert_eq!((t.iteration, t.shape.clone()), (3, vec![3]));
            let s = t.row_stats.as_ref().unwrap();
            assert_eq!((s.count, s.nan), (Some(3), Some(1)));
            assert!(
                s.max.is_some_and(f64::is_nan),
                "a NaN tensor's max is NaN, as in rows"
            );
            assert!(dump.tensors[0].id.timestamp < dump.tensors[1].id.timestamp);
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn hostile_files_are_refused_or_reported_never_panic() {
        let d = tmp("hostile");
        // Not a stream: detection says no, and open says what it looked for.
        for (name, bytes) in [
            ("empty.bin", &b""[..]),
            ("text.bin", &b"hello, world\n"[..]),
            ("zeros.bin", &[0u8; 100][..]),
        ] {
            let p = d.join(name);
            std::fs::write(&p, bytes).unwrap();
            assert!(!Stream.detect(&p), "{name}");
            let e = crate::Dump::open(&p).unwrap_err().to_string();
            assert!(e.contains("frame stream") && e.contains(name), "{e}");
        }
        // A stream with a corrupt frame, noise and a torn tail: the good records are read and
        // every bad place is a problem naming the file and the offset.
        let mut bytes = wire(&[
            stat("a", 0, &[1.0]),
            stat("b", 0, &[2.0]),
            stat("c", 0, &[3.0]),
        ]);
        let second = wire(&[stat("a", 0, &[1.0])]).len() + 1;
        // One byte of the second frame changed, never to the delimiter.
        let i = second + 20;
        bytes[i] = if bytes[i] == 0xaa { 0xab } else { 0xaa };
        bytes.extend(std::iter::repeat_n(0x77u8, 5000));
        bytes.extend_from_slice(&wire(&[stat("d", 0, &[4.0])])[..20]);
        let p = d.join("bad.opstream");
        std::fs::write(&p, &bytes).unwrap();
        let dump = crate::Dump::open(&p).unwrap();
        let names: Vec<&str> = dump.tensors.iter().map(|t| t.id.op_name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        let msgs: Vec<&str> = dump.problems.iter().map(|p| p.message.as_str()).collect();
        assert!(
            msgs.iter()
                .any(|m| m.starts_with(&format!("offset {second}: Corrupt"))
                    || m.starts_with(&format!("offset {second}: Torn"))),
            "{msgs:?}"
        );
        assert!(msgs.iter().any(|m| m.contains("OverLong")), "{msgs:?}");
        assert!(dump.problems.iter().all(|q| q.path == p));
        let _ = std::fs::remove_dir_all(&d);
    }
}
