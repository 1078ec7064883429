//! `opdump ingest SOURCE --config data_dump.json --out DIR`: a device agent's frame stream
//! (`docs/wire.md`) from a file, stdin, a serial device or one TCP sender, turned into the
//! standard dump layout by dump-host (`statistic.csv` per iteration, execution order,
//! `.dump_metadata`; no `.npy`).
//!
//! Frames are decoded as they arrive ([`dump_core::wire::Decoder`]); each stat record becomes
//! one row, appended whole, so whatever arrived before a dropped connection or a killed agent
//! is on disk. Torn, corrupt, duplicated, reordered and over-long frames are reported on
//! stderr with their byte offsets and skipped; the good frames around them are kept.

mod serial;

use std::{
    collections::HashMap,
    io::{Read, Write},
    net::TcpListener,
    path::PathBuf,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use dump_core::wire::{Decoder, EventRef, Frame, FrameRef, Io, ProblemKind, StatView};
use dump_host::{Dumper, Step, config::Env};

use super::{
    events::EventQueue,
    open_dump::{absolute, with_path},
    outcome::{Failure, Outcome, Verdict},
};

/// Arguments of `opdump ingest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the agent's frames come from: a file (a saved stream), a serial device such as
    /// /dev/ttyACM0 or /dev/ttyUSB0 (switched to raw mode for the run and restored after; the
    /// stream ends on a hang-up, after --idle seconds of silence, or on Ctrl-C), `-` for stdin,
    /// or `tcp://HOST:PORT` to listen there and accept one sender (port 0: any free port; the
    /// address is printed on stderr).
    pub source: String,
    /// The MindSpore data_dump.json deciding what is written: iteration, kernels,
    /// input_output, statistic_category. saved_data must be "statistic" (or "full": rows only).
    #[arg(long)]
    pub config: PathBuf,
    /// Where to write the dump (replaces the config's `path`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A serial SOURCE's line speed in baud (e.g. 115200); without it the device keeps its
    /// current speed. Only for a serial device.
    #[arg(long, value_name = "BAUD")]
    pub baud: Option<u32>,
    /// A serial SOURCE's stream ends after this many seconds without a byte (e.g. 5); without
    /// it the stream ends on a hang-up or Ctrl-C. Only for a serial device.
    #[arg(long, value_name = "SECONDS")]
    pub idle: Option<f64>,
}

/// What one ingest saw.
#[derive(Debug, Default)]
struct Tally {
    frames: u64,
    records: u64,
    problems: u64,
}

/// Frames in, Dumper calls out.
struct Session<'a> {
    dumper: Dumper,
    source: &'a str,
    /// Execution orders being received: graph id -> (kernels announced, names so far).
    orders: HashMap<u32, (u32, Vec<String>)>,
    /// Graphs whose execution order was written.
    described: HashMap<u32, ()>,
    /// The open step: graph, iteration, records received in it.
    step: Option<(u32, u32, u32, Step)>,
    tally: Tally,
    lines: Vec<String>,
}

impl Session<'_> {
    fn problem(&mut self, offset: u64, what: String) {
        self.tally.problems += 1;
        self.lines.push(format!(
            "opdump ingest: {}: offset {offset}: {what}",
            self.source
        ));
    }

    fn event(&mut self, e: EventRef<'_>) {
        match e {
            EventRef::Problem(p) => {
                let what = describe(p.kind, p.len);
                self.problem(p.offset, what);
            }
            EventRef::Frame { offset, frame, .. } => {
                self.tally.frames += 1;
                match frame {
                    FrameRef::Stat(r) => self.stat(offset, &r),
                    FrameRef::Session(f) => self.frame(offset, f.clone()),
                }
            }
        }
    }

    /// A frame other than a stat record (those come as [`StatView`]s, see `stat`).
    fn frame(&mut self, offset: u64, frame: Frame) {
        match frame {
            Frame::Hello(h) => self.lines.push(format!(
                "opdump ingest: agent `{}` on `{}`, session {}",
                h.agent, h.device, h.session
            )),
            Frame::BeginGraph(g) => {
                self.orders.insert(
                    g.graph_id,
                    (g.kernels, Vec::with_capacity(g.kernels as usize)),
                );
                self.described.remove(&g.graph_id);
                if g.kernels == 0 {
                    self.describe_graph(g.graph_id);
                }
            }
            Frame::Kernel(k) => {
                let Some((n, names)) = self.orders.get_mut(&k.graph_id) else {
                    return self.problem(
                        offset,
                        format!(
                            "kernel frame of graph {} without its begin-graph",
                            k.graph_id
                        ),
                    );
                };
                if k.index as usize != names.len() || k.index >= *n {
                    let want = names.len();
                    return self.problem(
                        offset,
                        format!(
                            "kernel frame {} of graph {} out of order (expected index {want})",
                            k.index, k.graph_id
                        ),
                    );
                }
                names.push(k.op.to_string());
                if names.len() == *n as usize {
                    self.describe_graph(k.graph_id);
                }
            }
            Frame::BeginStep(b) => {
                self.end_step(offset, None);
                self.open_step(b.graph_id, b.iteration);
            }
            Frame::Stat(r) => self.stat(offset, &StatView::from(&r)),
            Frame::EndStep(e) => {
                let open = self.step.as_ref().map(|s| (s.0, s.1));
                if open == Some((e.graph_id, e.iteration)) {
                    self.end_step(offset, Some((e.records, e.dropped)));
                } else {
                    self.problem(
                        offset,
                        format!(
                            "end-step of graph {} iteration {} that was not open",
                            e.graph_id, e.iteration
                        ),
                    );
                }
            }
        }
    }

    /// Writes graph `g`'s execution order once it is complete.
    fn describe_graph(&mut self, g: u32) {
        if let Some((_, names)) = self.orders.get(&g) {
            let order: Vec<&str> = names.iter().map(String::as_str).collect();
            // begin_graph only records a failed write, returned at close.
            let _ = self.dumper.begin_graph(g, &order);
            self.described.insert(g, ());
        }
    }

    fn open_step(&mut self, graph: u32, iteration: u32) {
        self.dumper.switch_graph(graph);
        self.dumper.set_step(u64::from(iteration));
        let step = self.dumper.begin_step();
        self.step = Some((graph, iteration, 0, step));
    }

    /// Finishes the open step; with the agent's end-step counts, checks them.
    fn end_step(&mut self, offset: u64, counts: Option<(u32, u32)>) {
        let Some((g, it, got, step)) = self.step.take() else {
            return;
        };
        if let Err(e) = step.finish() {
            self.problem(offset, format!("graph {g} iteration {it}: {e}"));
        }
        match counts {
            Some((sent, dropped)) => {
                if sent != got {
                    self.problem(
                        offset,
                        format!(
                            "graph {g} iteration {it}: the agent sent {sent} stat records, \
                             {got} arrived"
                        ),
                    );
                }
                if dropped > 0 {
                    self.problem(
                        offset,
                        format!(
                            "graph {g} iteration {it}: the agent could not send {dropped} \
                             wanted tensor(s)"
                        ),
                    );
                }
            }
            None => self.problem(
                offset,
                format!("graph {g} iteration {it} has no end-step (its rows are kept)"),
            ),
        }
    }

    fn stat(&mut self, offset: u64, r: &StatView<'_>) {
        self.tally.records += 1;
        let open = self.step.as_ref().map(|s| (s.0, s.1));
        if open != Some((r.graph_id, r.iteration)) {
            // Records are self-contained: a lost begin-step costs no row.
            if open.is_some() {
                self.end_step(offset, None);
            }
            self.open_step(r.graph_id, r.iteration);
        }
        let Some((_, _, got, step)) = self.step.as_mut() else {
            return;
        };
        *got += 1;
        // The kernel handle (several hundred bytes) stays where `kernel` made it and is
        // dropped there at the end of the block: not moved out of the `Option`, nor into
        // a `drop` call.
        let res = {
            let kernel = step.kernel(r.op_type(), r.op());
            let Some(k) = kernel.as_ref() else {
                return; // not wanted by the config
            };
            // On the stack: a record has at most MAX_RANK dimensions.
            let mut dims = [0usize; dump_core::wire::MAX_RANK];
            for (d, &s) in dims.iter_mut().zip(r.shape()) {
                *d = s as usize;
            }
            let shape = &dims[..r.shape().len()];
            match r.io {
                Io::Input => k.input_summary(r.slot, r.dtype, shape, r.summary, r.md5),
                Io::Output => k.output_summary(r.slot, r.dtype, shape, r.summary, r.md5),
            }
        };
        if let Err(e) = res {
            self.problem(offset, format!("stat record skipped: {e}"));
        }
    }
}

/// Words for a decoder problem.
fn describe(kind: ProblemKind, len: u64) -> String {
    let what = match kind {
        ProblemKind::Torn => "torn frame (cut short)".to_owned(),
        ProblemKind::Corrupt => "corrupt frame (CRC mismatch or not COBS)".to_owned(),
        ProblemKind::OverLong => format!(
            "over-long frame (no delimiter within {} bytes)",
            dump_core::wire::MAX_WIRE_LEN
        ),
        ProblemKind::UnknownVersion(v) => format!(
            "frame of wire version {v} (this opdump reads version {})",
            dump_core::wire::WIRE_VERSION
        ),
        ProblemKind::UnknownKind(k) => format!("frame of unknown kind {k}"),
        ProblemKind::BadPayload(why) => format!("frame payload does not decode: {why}"),
        ProblemKind::Duplicate { seq } => format!("duplicate frame (seq {seq})"),
        ProblemKind::Reordered { seq, expected } => {
            format!("reordered frame (seq {seq}, expected {expected})")
        }
        ProblemKind::Gap { expected, got } => {
            return format!(
                "{} frame(s) lost before this one (seq {got}, expected {expected}); it was kept",
                got.wrapping_sub(expected)
            );
        }
    };
    format!("{what}, {len} bytes skipped")
}

/// Opens SOURCE; for `tcp://`, listens and accepts one sender (the address on `err`); a
/// terminal is switched to raw mode ([`serial`]), with Ctrl-C ending its stream cleanly.
fn open_source(args: &Args, err: &mut dyn Write) -> Result<Box<dyn Read>, String> {
    let source = args.source.as_str();
    let serial_only =
        |what: &str| format!("{what} applies to a serial device; {source} is not a terminal");
    let is_file = source != "-" && !source.starts_with("tcp://");
    if !is_file {
        if args.baud.is_some() {
            return Err(serial_only("--baud"));
        }
        if args.idle.is_some() {
            return Err(serial_only("--idle"));
        }
    }
    if source == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    if let Some(addr) = source.strip_prefix("tcp://") {
        let l = TcpListener::bind(addr).map_err(|e| {
            format!("cannot listen on {source}: {e} (expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:7070)")
        })?;
        let local = l
            .local_addr()
            .map_err(|e| format!("cannot listen on {source}: {e}"))?;
        let _ = writeln!(err, "opdump ingest: listening on tcp://{local}");
        let _ = err.flush();
        let (s, peer) = l
            .accept()
            .map_err(|e| format!("{source}: accept failed: {e}"))?;
        let _ = writeln!(err, "opdump ingest: sender {peer} connected");
        return Ok(Box::new(s));
    }
    let idle = match args.idle {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(format!(
                "--idle {s}: expected seconds greater than 0 and at most 86400"
            ));
        }
    };
    let file = std::fs::File::open(source).map_err(|e| format!("cannot open {source}: {e}"))?;
    if !serial::is_terminal(&file) {
        if args.baud.is_some() {
            return Err(serial_only("--baud"));
        }
        if idle.is_some() {
            return Err(serial_only("--idle"));
        }
        return Ok(Box::new(file));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // Ctrl-C ends the stream (the step in progress is written) instead of killing the run. A
    // failure to install only loses that: the default Ctrl-C still stops the process.
    let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Relaxed));
    let opts = serial::SerialOptions {
        baud: args.baud,
        idle,
    };
    let reader = serial::SerialReader::open(file, source, opts, stop)?;
    let _ = writeln!(
        err,
        "opdump ingest: reading serial device {source} in raw mode{}{}",
        args.baud.map(|b| format!(", {b} baud")).unwrap_or_default(),
        idle.map(|d| format!(", ending after {} s of silence", d.as_secs_f64()))
            .unwrap_or_else(|| ", until it hangs up or Ctrl-C".to_owned())
    );
    let _ = err.flush();
    Ok(Box::new(reader))
}

/// Runs `ingest`: the summary on `out`, each stream problem on `err` with its byte offset;
/// [`Verdict::Found`] when problems were seen (bad frames, lost records, rows that could not be
/// made), though everything that arrived intact is written.
pub fn run(args: &Args, env: &dyn Env, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    let config = args.config.display().to_string();
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            return Err(Failure::Invalid(format!("cannot read {config}: {e}")));
        }
    };
    let text = match &args.out {
        None => text,
        Some(o) => match with_path(&text, &absolute(o)) {
            Ok(t) => t,
            Err(m) => {
                return Err(Failure::Invalid(format!("{config}: {m}")));
            }
        },
    };
    let events = EventQueue::new();
    let opts = match dump_host::DumpOptions::from_env(env) {
        Ok(o) => o,
        Err(e) => {
            return Err(Failure::Invalid(e.to_string()));
        }
    };
    let dumper = Dumper::builder()
        .env(env)
        .options(opts)
        .events(events.sink())
        .open_json(text.into_bytes());
    let dumper = match dumper {
        Ok(d) if d.is_enabled() => d,
        Ok(_) => {
            return Err(Failure::Invalid(format!(
                "{config}: dumping is disabled by this config"
            )));
        }
        Err(e) => {
            events.print_to(err);
            return Err(Failure::Invalid(format!("{config}: {e}")));
        }
    };
    if dumper.plan().is_some_and(|p| !p.saved_data.statistics()) {
        return Err(Failure::Invalid(format!(
            "{config}: saved_data \"tensor\" asks for .npy files, which a device \
             agent's statistics cannot make; allowed: \"statistic\" or \"full\" (rows only)"
        )));
    }
    let root = dumper
        .plan()
        .map(|p| p.root.display().to_string())
        .unwrap_or_default();
    let mut reader = match open_source(args, err) {
        Ok(r) => r,
        Err(m) => {
            return Err(Failure::Invalid(m.to_string()));
        }
    };
    let mut s = Session {
        dumper,
        source: &args.source,
        orders: HashMap::new(),
        described: HashMap::new(),
        step: None,
        tally: Tally::default(),
        lines: Vec::new(),
    };
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                s.problem(bytes, format!("read failed, the stream ends here: {e}"));
                break;
            }
        };
        bytes += n as u64;
        decoder.push_ref(&buf[..n], |e| s.event(e));
        for l in s.lines.drain(..) {
            let _ = writeln!(err, "{l}");
        }
        events.print_to(err);
    }
    decoder.finish_ref(|e| s.event(e));
    s.end_step(bytes, None);
    for l in s.lines.drain(..) {
        let _ = writeln!(err, "{l}");
    }
    let Session {
        mut dumper, tally, ..
    } = s;
    let closed = dumper.close();
    events.print_to(err);
    let rows = match closed {
        Ok(r) => r.rows,
        Err(e) => return Err(Failure::Failed(format!("writing the dump: {e}"))),
    };
    let _ = writeln!(
        out,
        "opdump ingest: {bytes} bytes, {} frames, {} stat records -> {rows} statistic rows in \
         {root}; {} problem(s)",
        tally.frames, tally.records, tally.problems
    );
    if tally.problems > 0 {
        let _ = writeln!(
            err,
            "opdump ingest: {} problem(s) in {} (see above); everything else was kept",
            tally.problems, args.source
        );
        Ok(Verdict::Found)
    } else {
        Ok(Verdict::Clean)
    }
}
