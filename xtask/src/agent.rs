//! `cargo xtask agent-qemu`: the device agent on an emulated Cortex-M4, end to end.
//!
//! 1. builds `firmware/`'s `agent` binary (release) for thumbv7em-none-eabihf;
//! 2. boots it in `qemu-system-arm` (mps2-an386, semihosting, `-icount shift=0`) from the
//!    workspace root, so its stream lands in `target/agent-stream.bin`;
//! 3. decodes the stream with `dump_core::wire::Decoder` (no problem allowed), recomputes the
//!    same network on the host (`firmware/src/net.rs` is compiled in here) and checks every stat
//!    record: names, io, slot, shape, dtype, counts and extrema exactly, sums to 1e-12, MD5 and
//!    sample bit for bit (so the device computed the very same tensors);
//! 4. compares it byte for byte with the committed capture `tests/fixtures/agent/agent-stream.opstream`
//!    (which `opdump`'s `cli_ingest_agent` test ingests; `OPDUMP_UPDATE_FIXTURES=1` rewrites it);
//! 5. prints the footprint (ELF sections: flash = allocated non-NOBITS, RAM = writable
//!    allocated, plus the stack the firmware measured) and instructions per element / per call
//!    from the firmware's SysTick-under-icount measurements, and a preview of `statistic.csv`
//!    rows made from the decoded records.
//!
//! `cargo xtask wire-fuzz [N]` runs dump-core's frame-decoder mutation campaign in release
//! with N mutated frames (default 10^6).

#[path = "../../firmware/src/net.rs"]
#[allow(dead_code)]
mod net;

use crate::toolchain;
use dump_core::{
    DType,
    hash::md5,
    stats::summarize,
    wire::{Decoder, Event, Frame, Io, StatRecord},
};
use dump_stats::{
    CategorySet, TensorStats,
    csv::{Io as CsvIo, RowMeta, data_size, header_string, row_string},
};
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// The firmware's plan (`firmware/src/agent_run.rs`): dumped steps of 0..STEPS.
const DUMPED: [u32; 6] = [0, 2, 3, 5, 6, 7];
/// Steps the firmware runs.
const STEPS: u32 = 8;
/// Sample bytes per tensor in the firmware's plan.
const SAMPLE: usize = 16;
/// The firmware's weight seed.
const WEIGHT_SEED: u32 = 0x0BAD_5EED;
/// How long qemu may run.
const QEMU_LIMIT: Duration = Duration::from_secs(300);

/// Runs `cargo xtask agent-qemu`.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("agent-qemu takes no arguments (got `{a}`)"));
    }
    let root = toolchain::workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    toolchain::check_target_installed()?;
    toolchain::check_qemu()?;
    let firmware = root.join("firmware");
    toolchain::run_step(
        &cargo,
        &firmware,
        &["build", "--release", "--bin", "agent"].map(String::from),
    )?;
    let elf = firmware.join("target/thumbv7em-none-eabihf/release/agent");
    let stream_path = root.join("target/agent-stream.bin");
    std::fs::create_dir_all(root.join("target")).map_err(|e| format!("target/: {e}"))?;
    let _ = std::fs::remove_file(&stream_path);

    let out = run_qemu(&root, &elf)?;
    print!("{out}");
    let agent_line = out
        .lines()
        .find(|l| l.starts_with("agent: "))
        .ok_or("the firmware did not print its `agent:` line")?;
    if out.lines().any(|l| l.starts_with("FAIL")) {
        return Err("the firmware reported a failure (FAIL lines above)".into());
    }
    let stream = std::fs::read(&stream_path)
        .map_err(|e| format!("cannot read {}: {e}", stream_path.display()))?;
    let records = check_stream(&stream)?;
    check_fixture(&root, &stream)?;
    let (flash, ram) = footprint(&elf)?;
    let m = Measures::parse(&out)?;

    println!(
        "agent-qemu: stream {} bytes, {} stat records, decoded with no problem and equal to the host's recomputation (MD5s included)",
        stream.len(),
        records.len()
    );
    println!("agent-qemu: firmware {agent_line}");
    println!(
        "agent-qemu: footprint of the agent ELF: flash {flash} bytes (.vector_table+.text+.rodata+.data), static RAM {ram} bytes (.data+.bss+.uninit), plus the stack above"
    );
    println!(
        "agent-qemu: qemu -icount instructions (calibrated: {:.2} per SysTick tick):",
        m.per_tick
    );
    for (name, what) in [
        ("stats_f32", "per element, Summary of 16384 f32"),
        ("stats_md5_f32", "per element, Summary + MD5 of 16384 f32"),
        ("stats_bf16", "per element, Summary of 8192 bf16"),
        (
            "frame_64",
            "per stat frame of a 64-element f32 tensor (stats, record, CRC, COBS)",
        ),
        (
            "unwanted_kernel",
            "per unwanted kernel in a dumped step, kernel() (name compares + loop)",
        ),
        (
            "unwanted_kernel_at",
            "per unwanted kernel in a dumped step, kernel_at() (bit test + loop)",
        ),
        (
            "unwanted_step",
            "per kernel call in a step not dumped (+ loop)",
        ),
        ("empty_loop", "per iteration of the empty measuring loop"),
        (
            "stream",
            "per network step of the demo (8 steps, 6 dumped, 22 tensors each)",
        ),
    ] {
        println!("  {:>10.1}  {what}", m.insns(name)?);
    }
    println!("agent-qemu: statistic.csv preview from the decoded records:");
    let cats = CategorySet::parse(["max", "min", "avg", "l2norm", "count", "md5"])
        .map_err(|e| format!("{e}"))?;
    print!("  {}", header_string(&cats));
    for r in records.iter().take(3) {
        println!("  {}", csv_row(r, &cats)?.trim_end());
    }
    Ok(())
}

/// The committed capture of the stream (`opdump`'s `cli_ingest_agent` test ingests it): it
/// must still be what the firmware sends. `OPDUMP_UPDATE_FIXTURES=1` rewrites it.
const FIXTURE: &str = "tests/fixtures/agent/agent-stream.opstream";

/// Compares the fresh stream with [`FIXTURE`] byte for byte (or rewrites it on request).
fn check_fixture(root: &Path, stream: &[u8]) -> Result<(), String> {
    let path = root.join(FIXTURE);
    if std::env::var_os("OPDUMP_UPDATE_FIXTURES").is_some_and(|v| v == "1") {
        std::fs::write(&path, stream).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("agent-qemu: rewrote {FIXTURE} ({} bytes)", stream.len());
        return Ok(());
    }
    let committed = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if committed != stream {
        let at = committed
            .iter()
            .zip(stream)
            .position(|(a, b)| a != b)
            .unwrap_or(committed.len().min(stream.len()));
        return Err(format!(
            "the firmware's stream ({} bytes) differs from {FIXTURE} ({} bytes) from byte {at}; \
             if the firmware changed on purpose, rerun with OPDUMP_UPDATE_FIXTURES=1 and commit",
            stream.len(),
            committed.len()
        ));
    }
    println!("agent-qemu: stream equal, byte for byte, to the committed {FIXTURE}");
    Ok(())
}

/// Boots `elf` in qemu from `dir` with instruction counting; returns stdout.
fn run_qemu(dir: &Path, elf: &Path) -> Result<String, String> {
    let args = [
        "-cpu",
        "cortex-m4",
        "-machine",
        "mps2-an386",
        "-nographic",
        "-semihosting-config",
        "enable=on,target=native",
        "-icount",
        "shift=0",
        "-kernel",
    ];
    println!(
        "agent-qemu: ({}) {} {} {}",
        dir.display(),
        toolchain::QEMU,
        args.join(" "),
        elf.display()
    );
    let mut child = Command::new(toolchain::QEMU)
        .args(args)
        .arg(elf)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", toolchain::QEMU))?;
    let mut stdout = child.stdout.take().ok_or("no qemu stdout")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| format!("waiting for qemu: {e}"))?
        {
            break st;
        }
        if start.elapsed() > QEMU_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "qemu ran longer than {QEMU_LIMIT:?} and was stopped"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().map_err(|_| "qemu output reader panicked")?;
    if !status.success() {
        print!("{out}");
        return Err(format!("the agent firmware failed in qemu ({status})"));
    }
    Ok(out)
}

/// One tensor the host expects, in stream order.
struct Expected {
    step: u32,
    kernel: usize,
    output: bool,
    slot: u32,
    shape: Vec<u32>,
    bytes: Vec<u8>,
}

/// Decodes the stream and checks it against the host's own run of the network; returns the
/// stat records.
fn check_stream(stream: &[u8]) -> Result<Vec<StatRecord>, String> {
    let mut frames = Vec::new();
    let mut problems = Vec::new();
    let mut d = Decoder::new();
    d.push(stream, |e| match e {
        Event::Frame { frame, .. } => frames.push(frame),
        Event::Problem(p) => problems.push(p),
    });
    d.finish(|e| {
        if let Event::Problem(p) = e {
            problems.push(p);
        }
    });
    if !problems.is_empty() {
        return Err(format!("the stream has problems: {problems:?}"));
    }
    let mut it = frames.into_iter();
    match it.next() {
        Some(Frame::Hello(h)) if h.session == 1 && h.md5 => {}
        other => return Err(format!("first frame is not the agent's hello: {other:?}")),
    }
    match it.next() {
        Some(Frame::BeginGraph(g)) if g.graph_id == 0 && g.kernels == 8 => {}
        other => return Err(format!("second frame is not begin-graph 0 of 8: {other:?}")),
    }
    for (i, (t, n)) in net::KERNELS.iter().enumerate() {
        match it.next() {
            Some(Frame::Kernel(k)) if k.index as usize == i && k.op_type == *t && k.op == *n => {}
            other => return Err(format!("kernel frame {i}: {other:?}")),
        }
    }

    // The host's run of the same network.
    let weights = net::Weights::seeded(WEIGHT_SEED);
    let mut act = net::Activations::ZERO;
    let mut expected = Vec::new();
    for step in 0..STEPS {
        let x = net::input(step);
        net::run(&weights, &x, &mut act, |kernel, tensors| {
            for t in tensors {
                expected.push(Expected {
                    step,
                    kernel,
                    output: t.output,
                    slot: t.slot,
                    shape: t.shape.to_vec(),
                    bytes: bytemuck::cast_slice(t.data).to_vec(),
                });
            }
        });
    }

    let mut records = Vec::new();
    for step in DUMPED {
        match it.next() {
            Some(Frame::BeginStep(b)) if b.iteration == step => {}
            other => return Err(format!("begin-step {step}: {other:?}")),
        }
        let mut n = 0;
        for e in expected.iter().filter(|e| e.step == step) {
            let Some(Frame::Stat(r)) = it.next() else {
                return Err(format!("step {step}: a stat frame is missing"));
            };
            check_record(&r, e)?;
            records.push(r);
            n += 1;
        }
        match it.next() {
            Some(Frame::EndStep(end))
                if end.iteration == step && end.records == n && end.dropped == 0 => {}
            other => return Err(format!("end-step {step} with {n} records: {other:?}")),
        }
    }
    if let Some(extra) = it.next() {
        return Err(format!("unexpected frame after the last step: {extra:?}"));
    }
    Ok(records)
}

fn check_record(r: &StatRecord, e: &Expected) -> Result<(), String> {
    let (op_type, op_name) = net::KERNELS[e.kernel];
    let io = if e.output { Io::Output } else { Io::Input };
    let what = format!("step {} {op_name} {} {}", e.step, io.name(), e.slot);
    let elems = e.bytes.len() / 4;
    let want = summarize(DType::Float32, &e.bytes, elems)
        .map_err(|err| format!("{what}: {err}"))?
        .ok_or_else(|| format!("{what}: empty"))?;
    let s = r.summary;
    let same_f = |a: f64, b: f64| a.to_bits() == b.to_bits();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) || same_f(a, b);
    let ok = r.graph_id == 0
        && r.iteration == e.step
        && r.op_type == op_type
        && r.op == op_name
        && r.io == io
        && r.slot == e.slot
        && r.dtype == DType::Float32
        && r.shape[..] == e.shape[..]
        && (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg)
            == (
                want.count,
                want.nan,
                want.pos_inf,
                want.neg_inf,
                want.zero,
                want.pos,
                want.neg,
            )
        && same_f(s.max, want.max)
        && same_f(s.min, want.min)
        && same_f(s.first_nan, want.first_nan)
        && same_f(s.last_nan, want.last_nan)
        && close(s.sum, want.sum)
        && close(s.sum_sq, want.sum_sq)
        && r.md5 == Some(md5(&e.bytes))
        && r.sample.as_deref() == Some(&e.bytes[..SAMPLE.min(e.bytes.len())]);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: the device's record differs from the host's\n  device {r:?}\n  host   {want:?}"
        ))
    }
}

/// One `statistic.csv` row from a decoded record (task/stream 0, timestamp 0 here).
fn csv_row(r: &StatRecord, cats: &CategorySet) -> Result<String, String> {
    let shape: Vec<usize> = r.shape.iter().map(|&d| d as usize).collect();
    let elems = r.elements().unwrap_or(0) as usize;
    let meta = RowMeta {
        id: dump_stats::TensorId {
            op_type: &r.op_type,
            op_name: &r.op,
            task_id: 0,
            stream_id: 0,
            timestamp: 0,
            io: match r.io {
                Io::Input => CsvIo::Input,
                Io::Output => CsvIo::Output,
            },
            slot: r.slot,
        },
        data_size: data_size(r.dtype, elems).unwrap_or(0),
        dtype: r.dtype,
        shape: &shape,
    };
    let stats = TensorStats {
        summary: Some(r.summary),
        md5: r.md5,
        sha1: None,
    };
    row_string(&meta, cats, &stats)
        .map_err(|e| format!("{e}"))?
        .ok_or_else(|| "an empty tensor has no row".to_owned())
}

/// Flash and static RAM of an ELF32 little-endian image, from its section headers.
fn footprint(elf: &Path) -> Result<(u64, u64), String> {
    let b = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let bad = || format!("{} is not a 32-bit little-endian ELF", elf.display());
    if b.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 1, 1][..]) {
        return Err(bad());
    }
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]]));
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let shoff = u32_at(0x20).ok_or_else(bad)? as usize;
    let shentsize = u16_at(0x2E).ok_or_else(bad)? as usize;
    let shnum = u16_at(0x30).ok_or_else(bad)? as usize;
    const SHF_WRITE: u32 = 1;
    const SHF_ALLOC: u32 = 2;
    const SHT_NOBITS: u32 = 8;
    let (mut flash, mut ram) = (0u64, 0u64);
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        let kind = u32_at(h + 4).ok_or_else(bad)?;
        let flags = u32_at(h + 8).ok_or_else(bad)?;
        let size = u64::from(u32_at(h + 20).ok_or_else(bad)?);
        if flags & SHF_ALLOC == 0 {
            continue;
        }
        if kind != SHT_NOBITS {
            flash += size;
        }
        if flags & SHF_WRITE != 0 {
            ram += size;
        }
    }
    Ok((flash, ram))
}

/// The firmware's `measure NAME ticks=T units=U` lines.
struct Measures {
    per_tick: f64,
    lines: Vec<(String, f64, f64)>,
}

impl Measures {
    fn parse(out: &str) -> Result<Measures, String> {
        let mut lines = Vec::new();
        let mut per_tick = None;
        for l in out.lines() {
            let mut w = l.split_whitespace();
            if w.next() != Some("measure") {
                continue;
            }
            let name = w.next().unwrap_or_default().to_owned();
            let field = |w: Option<&str>, key: &str| {
                w.and_then(|f| f.strip_prefix(key))
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| format!("bad measure line `{l}`"))
            };
            let ticks = field(w.next(), "ticks=")?;
            if name == "calibrate" {
                let insns = field(w.next(), "insns=")?;
                per_tick = Some(insns / ticks);
            } else {
                lines.push((name, ticks, field(w.next(), "units=")?));
            }
        }
        Ok(Measures {
            per_tick: per_tick.ok_or("the firmware printed no calibration")?,
            lines,
        })
    }

    /// Instructions per unit of measurement `name`.
    fn insns(&self, name: &str) -> Result<f64, String> {
        let (_, ticks, units) = self
            .lines
            .iter()
            .find(|(n, ..)| n == name)
            .ok_or_else(|| format!("no `{name}` measurement"))?;
        Ok(ticks * self.per_tick / units)
    }
}

/// Runs `cargo xtask wire-fuzz [N]`: dump-core's mutation campaign with N mutated frames in a
/// release build.
pub fn fuzz(args: &[String]) -> Result<(), String> {
    let n: u64 = match args.first() {
        None => 1_000_000,
        Some(a) => a
            .parse()
            .map_err(|_| format!("wire-fuzz takes a number of mutated frames (got `{a}`)"))?,
    };
    let root = toolchain::workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args = [
        "test",
        "--release",
        "-p",
        "dump-core",
        "--features",
        "serde",
        "--lib",
        "wire::tests::mutated_streams_never_lose_a_good_frame",
        "--",
        "--nocapture",
    ]
    .map(String::from);
    println!("wire-fuzz: OPDUMP_WIRE_FUZZ_FRAMES={n}");
    let status = Command::new(&cargo)
        .args(&args)
        .current_dir(&root)
        .env("OPDUMP_WIRE_FUZZ_FRAMES", n.to_string())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the wire mutation campaign failed ({status})"))
    }
}
