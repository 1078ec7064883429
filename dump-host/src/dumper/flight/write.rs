//! A trigger's write: the deferred once-files (metadata, execution orders, graphs), the held
//! constants, each held step in the plan's layout (statistic tables written whole through a
//! temporary name and a rename, tensor files through the writer, temp + rename each), the
//! global execution order, and — once every file is on disk — `trigger.json`.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::SystemTime};

use serde_json::{Value, json};

use super::{Fired, Held, NonFiniteAt, Recorder, StepRecord};
use crate::{
    diag::Event,
    dumper::out::Out,
    writer::{FILE_MODE, write_bytes_atomic},
};

/// What writing one record produced.
#[derive(Default)]
struct Written {
    tensors: u64,
    dropped: u64,
    bytes_freed: u64,
}

/// Writes `steps` (oldest first) for trigger number `n`; returns the bytes of copies freed.
pub(super) fn write(
    out: &Out,
    r: &Recorder,
    (constants, steps): (&[Arc<StepRecord>], &[Arc<StepRecord>]),
    fired: &Fired,
    n: u32,
) -> u64 {
    let started = std::time::Instant::now();
    let errors = out.files.writer().errors();
    let failed_before = errors.total();
    let deferred = std::mem::take(&mut *r.deferred.lock().unwrap_or_else(|e| e.into_inner()));
    let (tree, meta) = (&out.tree, &out.meta);
    if deferred.metadata {
        meta.write_metadata(tree);
    }
    for (g, order) in &deferred.orders {
        let names: Vec<&str> = order.iter().map(String::as_str).collect();
        meta.write_execution_order(tree, *g, &names);
    }
    for (g, graph) in &deferred.graphs {
        meta.write_graph(tree, *g, graph);
    }
    let mut total = Written::default();
    for c in constants {
        let w = write_record(out, c);
        total.bytes_freed += w.bytes_freed;
    }
    let mut first_nonfinite: Option<NonFiniteAt> = None;
    for rec in steps {
        let w = write_record(out, rec);
        total.tensors += w.tensors;
        total.dropped += w.dropped;
        total.bytes_freed += w.bytes_freed;
        if first_nonfinite.is_none() {
            first_nonfinite = rec.lock().first_nonfinite.clone();
        }
    }
    // Every tensor file renamed into place before trigger.json says the write is complete.
    out.files.writer().budget().wait_idle();
    // msprobe's layout: each step's dump.json (then construct.json, stack.json) once the
    // tensor files it names are on disk.
    for rec in steps {
        if let Some(doc) = &rec.doc {
            doc.write(out);
        }
    }
    let path = tree.layout().trigger_file(n);
    // Files of this write that failed (a full or read-only disk): trigger.json is still
    // written, and says so, rather than leaving the write looking complete.
    let failed = errors.total() - failed_before;
    let failure = Failures {
        count: failed,
        last: (failed > 0).then(|| errors.last()).flatten(),
    };
    let doc = trigger_json(
        tree.layout().root(),
        r,
        (steps, fired, first_nonfinite.as_ref()),
        (&total, &failure),
        started,
    );
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    if tree
        .ensure_dir(path.parent().unwrap_or(tree.layout().root()))
        .is_ok()
        && let Err(e) = write_bytes_atomic(&path, FILE_MODE, text.as_bytes())
    {
        out.files.writer().errors().record(path.clone(), e);
    }
    r.events.emit(&Event::FlightRecorderWrote {
        trigger_file: path,
        kind: fired.kind(),
        what: fired.what(),
        steps: steps.iter().map(|x| x.iteration).collect(),
        tensors: total.tensors,
        dropped_tensors: total.dropped,
    });
    total.bytes_freed
}

/// Writes one held step (or the constants) and empties it.
fn write_record(out: &Out, rec: &StepRecord) -> Written {
    let (entries, used, dropped, bytes) = {
        let mut r = rec.lock();
        let e = std::mem::take(&mut r.entries);
        let out = (e, r.used, r.dropped, r.bytes);
        r.bytes = 0;
        r.dropped = 0;
        out
    };
    let mut w = Written {
        dropped,
        bytes_freed: bytes,
        ..Written::default()
    };
    // msprobe's statistics live in the document, not in rows.
    let used = used || rec.doc.as_ref().is_some_and(|d| d.has_calls());
    if !entries.is_empty() && out.tree.ensure_dir(&rec.dir).is_ok() {
        write_entries(out, rec, entries, &mut w);
    } // else nothing to write, or the failure is recorded in the writer's log
    if rec.is_step && used {
        out.append_global_order(rec.graph, rec.iteration);
    }
    w
}

/// Writes the held rows, tensor files and arguments of `rec`.
fn write_entries(out: &Out, rec: &StepRecord, entries: Vec<Held>, w: &mut Written) {
    let mut tables: BTreeMap<PathBuf, String> = BTreeMap::new();
    for e in entries {
        match e {
            Held::Row { csv, text } => tables.entry(csv).or_default().push_str(&text),
            Held::Npy(n) => {
                let Some(mut bytes) = n.bytes else { continue };
                bytes.truncate(n.len);
                // Refused by the disk budget (reported once), or a tensor the npy encoder
                // rejects (checked when it was held): its row is written all the same.
                let file = (n.dtype, n.shape.as_slice());
                if let Ok(Some(npy)) = out
                    .files
                    .prepare(&out.tables, &rec.dir, n.name, file, n.len)
                {
                    w.tensors += 1;
                    out.files.write(npy, std::borrow::Cow::Owned(bytes));
                }
            }
            Held::Args { kernel, args } => {
                let args: Vec<(&str, &str)> =
                    args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                out.write_kernel_args(&rec.dir, &kernel, &args);
            }
        }
    }
    for (csv, rows) in tables {
        // A table already written (constants of an earlier write) gets its rows appended
        // whole.
        out.tables.write_table(&csv, &rows);
    }
}

fn nonfinite_json(at: &NonFiniteAt) -> Value {
    json!({
        "step": at.step,
        "graph": at.graph,
        "kernel": at.kernel,
        "op_type": at.op_type,
        "tensor": format!("{}.{}", at.io, at.slot),
        "dtype": at.dtype.name(),
        "nan": at.nan,
        "pos_inf": at.pos_inf,
        "neg_inf": at.neg_inf,
    })
}

/// The write failures of one trigger's write.
struct Failures {
    count: u64,
    /// The latest failure recorded, as `path: error`.
    last: Option<String>,
}

fn trigger_json(
    root: &std::path::Path,
    r: &Recorder,
    (steps, fired, first): (&[Arc<StepRecord>], &Fired, Option<&NonFiniteAt>),
    (total, failed): (&Written, &Failures),
    started: std::time::Instant,
) -> Value {
    let trigger = match fired {
        Fired::Output { kind, at } => {
            let mut v = nonfinite_json(at);
            v["kind"] = json!(kind);
            v
        }
        Fired::Growth(g) => json!({
            "kind": "l2norm_growth",
            "step": g.step,
            "graph": g.graph,
            "kernel": g.kernel,
            "op_type": g.op_type,
            "tensor": format!("output.{}", g.slot),
            "l2norm": g.l2norm,
            "ring_median": g.median,
            "factor": g.factor,
        }),
        Fired::User { reason } => json!({
            "kind": "user",
            "reason": reason,
            "step": steps.last().map(|x| x.iteration),
            "graph": steps.last().map(|x| x.graph),
        }),
    };
    let unix_us = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    json!({
        "format": "opdump-trigger/1",
        "trigger": trigger,
        "first_nonfinite": first.map(nonfinite_json),
        "steps_written": steps.iter().map(|x| json!({
            "graph": x.graph,
            "step": x.iteration,
            "dir": x.written_dir().strip_prefix(root).unwrap_or(x.written_dir()),
        })).collect::<Vec<_>>(),
        "tensor_files": total.tensors,
        "tensors_let_go": total.dropped,
        "write_failures": failed.count,
        "write_failure": failed.last,
        "flight_recorder": {
            "steps": r.settings.steps,
            "budget_bytes": r.settings.budget_bytes,
            "max_triggers": r.settings.max_triggers,
            "l2norm_growth": r.settings.l2norm_growth,
        },
        "write_micros": started.elapsed().as_micros() as u64,
        "written_unix_us": unix_us,
    })
}
