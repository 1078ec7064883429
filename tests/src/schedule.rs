//! Seeded producer schedules for the hardening campaign (`tests/schedules.rs`, the
//! `opdump-schedule-child` binary that is killed with SIGKILL, `cargo xtask hardening`): 8
//! producer threads report kernels to one [`Step`] in an interleaving drawn from a seed, every
//! tensor's bytes follow from its kernel name, io and slot, and [`check_tree`] checks a dump
//! tree against the campaign's invariants.

use std::{
    collections::BTreeMap,
    fs,
    path::Path,
    sync::{Condvar, Mutex},
};

use dump_core::DType;
use dump_host::{
    Error, Step, TensorRef,
    writer::{TMP_PREFIX, WriterConfig},
};

use crate::{csv::parse_statistic_csv, fsutil::walk};

/// A small seeded generator (splitmix64): the same seed gives the same schedule.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A writer configuration drawn from `rng`: synchronous or 1, 2 or 4 threads; a budget of
/// 64 KiB (producers wait often), 256 KiB or 4 MiB; every tensor written directly, those of
/// 16 KiB and more, or none.
pub fn writer_config(rng: &mut Rng) -> WriterConfig {
    let pick = |rng: &mut Rng, from: &[usize]| from[rng.below(from.len() as u64) as usize];
    WriterConfig {
        threads: pick(rng, &[0, 1, 2, 4]),
        budget_bytes: pick(rng, &[64 << 10, 256 << 10, 4 << 20]),
        direct_write_bytes: pick(rng, &[0, 16 << 10, usize::MAX]),
        ..WriterConfig::default()
    }
}

/// The full scope name of kernel `n` of producer `thread`.
pub fn full_name(thread: usize, n: usize) -> String {
    format!("Default/t{thread}/Mul-op{n}")
}

fn key(op_name: &str, io: &str, slot: u32) -> u64 {
    // FNV-1a: stable across runs and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in op_name.bytes().chain(io.bytes()).chain([slot as u8]) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// How many `f32` elements the tensor `(op_name, io, slot)` has: mostly up to 1024 (queued),
/// one in eight up to 16 Ki (64 KiB: written directly with a small `direct_write_bytes`).
pub fn elems(op_name: &str, io: &str, slot: u32) -> usize {
    let h = key(op_name, io, slot);
    if h.is_multiple_of(8) {
        1 + (h >> 8) as usize % (16 << 10)
    } else {
        1 + (h >> 8) as usize % 1024
    }
}

/// The `f32` values of tensor `(op_name, io, slot)`: `base + i` with `base = key % 1000`, so
/// every value is an exact small integer and the maximum is `base + elems - 1`.
pub fn values(op_name: &str, io: &str, slot: u32) -> Vec<f32> {
    let base = (key(op_name, io, slot) % 1000) as f32;
    (0..elems(op_name, io, slot))
        .map(|i| base + i as f32)
        .collect()
}

/// [`values`] as little-endian bytes.
pub fn tensor_bytes(op_name: &str, io: &str, slot: u32) -> Vec<u8> {
    values(op_name, io, slot)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// Lets producer threads act in a seeded order: the `i`-th action of the whole schedule is
/// taken by thread `order[i]`, whatever the OS scheduler does.
struct Turnstile {
    order: Vec<usize>,
    pos: Mutex<usize>,
    turn: Condvar,
    /// The threads in the order they acted.
    done: Mutex<Vec<usize>>,
}

impl Turnstile {
    /// Runs `action` when it is `thread`'s turn, then passes the turn on.
    fn act<R>(&self, thread: usize, action: impl FnOnce() -> R) -> R {
        let mut pos = self.pos.lock().unwrap_or_else(|e| e.into_inner());
        while self.order.get(*pos).is_some_and(|&t| t != thread) {
            pos = self.turn.wait(pos).unwrap_or_else(|e| e.into_inner());
        }
        let r = action();
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(thread);
        *pos += 1;
        self.turn.notify_all();
        r
    }
}

/// One action of a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Begin a kernel (it stays open while later actions run).
    Begin,
    /// Report the next input of the oldest open kernel.
    Input,
    /// Report the next output of the newest open kernel.
    Output,
    /// End (drop) the oldest open kernel.
    End,
}

/// What one step of a schedule reported: `(op_name, io, slot)` of every tensor given.
pub type Reported = Vec<(String, &'static str, u32)>;

/// One step of a schedule, as run.
#[derive(Debug)]
pub struct StepRun {
    /// Every tensor reported.
    pub reported: Reported,
    /// The producer of each action, in the order drawn from the seed.
    pub planned: Vec<usize>,
    /// The producer of each action, in the order the actions ran.
    pub executed: Vec<usize>,
}

/// The producer of each action of the schedule for `seed` (what [`run_step`] runs when
/// `ordered`), with each producer's action list.
fn schedule(seed: u64, threads: usize, kernels: usize) -> (Vec<Vec<Action>>, Vec<usize>) {
    let mut rng = Rng::new(seed);
    // Each thread's action list, then a random merge of them.
    let plans: Vec<Vec<Action>> = (0..threads)
        .map(|_| producer_plan(&mut rng, kernels))
        .collect();
    let mut left: Vec<usize> = plans.iter().map(Vec::len).collect();
    let mut order = Vec::with_capacity(left.iter().sum());
    while left.iter().any(|&n| n > 0) {
        let live: Vec<usize> = (0..threads).filter(|&t| left[t] > 0).collect();
        let t = live[rng.below(live.len() as u64) as usize];
        left[t] -= 1;
        order.push(t);
    }
    (plans, order)
}

/// Runs one step of the schedule for `seed`: `threads` producers each begin `kernels`
/// kernels, report inputs and outputs and end them, interleaved (up to 3 kernels open per
/// thread, actions of all threads in a seeded order; `ordered: false` lets the OS interleave
/// instead). Kernel numbers start at `first`, so names are unique over steps. The first
/// Dumper error stops that producer's reports and is returned.
pub fn run_step(
    step: &Step,
    seed: u64,
    threads: usize,
    kernels: usize,
    first: usize,
    ordered: bool,
) -> Result<StepRun, Error> {
    let (plans, planned) = schedule(seed, threads, kernels);
    let gate = Turnstile {
        order: if ordered { planned.clone() } else { Vec::new() },
        pos: Mutex::new(0),
        turn: Condvar::new(),
        done: Mutex::new(Vec::new()),
    };
    let names: Vec<Vec<String>> = (0..threads)
        .map(|t| (first..first + kernels).map(|n| full_name(t, n)).collect())
        .collect();
    let results: Vec<Result<Reported, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .zip(&names)
            .enumerate()
            .map(|(t, (plan, names))| {
                let gate = &gate;
                s.spawn(move || produce(step, gate, t, plan, names))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("producer thread panicked"))
            .collect()
    });
    let mut reported = Vec::new();
    for r in results {
        reported.extend(r?);
    }
    let executed = gate.done.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(StepRun {
        reported,
        planned,
        executed,
    })
}

/// A producer's actions: `kernels` begins, each kernel 0-3 inputs and 1-2 outputs, ends; at
/// most 3 kernels open at once.
fn producer_plan(rng: &mut Rng, kernels: usize) -> Vec<Action> {
    let mut plan = Vec::new();
    let (mut begun, mut open) = (0, 0usize);
    while begun < kernels || open > 0 {
        let can_begin = begun < kernels && open < 3;
        match rng.below(4) {
            0 | 1 if can_begin => {
                plan.push(Action::Begin);
                begun += 1;
                open += 1;
            }
            2 if open > 0 => plan.push(if rng.below(2) == 0 {
                Action::Input
            } else {
                Action::Output
            }),
            _ if open > 0 => {
                plan.push(Action::End);
                open -= 1;
            }
            _ => {}
        }
    }
    plan
}

/// An open kernel of a producer: its sanitised name, the Dumper's handle and the next slots.
struct Open<'s> {
    name: String,
    kernel: dump_host::Kernel<'s>,
    inputs: u32,
    outputs: u32,
}

/// Producer `thread`'s side of the schedule; `full_names` are its kernels' unsanitised names,
/// in the order it begins them.
fn produce<'s>(
    step: &'s Step,
    gate: &Turnstile,
    thread: usize,
    plan: &[Action],
    full_names: &'s [String],
) -> Result<Reported, Error> {
    let mut open: Vec<Open<'s>> = Vec::new();
    let mut reported = Vec::new();
    let mut begun = 0;
    let mut result = Ok(());
    for &action in plan {
        gate.act(thread, || {
            if result.is_err() {
                return; // keep taking turns so the other producers go on
            }
            result = match action {
                Action::Begin => {
                    let full = &full_names[begun];
                    begun += 1;
                    // `None`: not dumped this step (an inactive iteration).
                    if let Some(kernel) = step.kernel("Mul", full) {
                        open.push(Open {
                            name: dump_host::layout::sanitize(full),
                            kernel,
                            inputs: 0,
                            outputs: 0,
                        });
                    }
                    Ok(())
                }
                Action::Input => match open.first_mut() {
                    Some(k) => {
                        k.inputs += 1;
                        report(k, "input", k.inputs - 1, &mut reported)
                    }
                    None => Ok(()),
                },
                Action::Output => match open.last_mut() {
                    Some(k) => {
                        k.outputs += 1;
                        report(k, "output", k.outputs - 1, &mut reported)
                    }
                    None => Ok(()),
                },
                Action::End if open.is_empty() => Ok(()),
                Action::End => {
                    let k = open.remove(0);
                    // Every kernel reports at least one tensor before it ends.
                    if k.inputs + k.outputs == 0 {
                        report(&k, "output", 0, &mut reported)
                    } else {
                        Ok(())
                    }
                }
            };
        });
    }
    drop(open);
    result.map(|()| reported)
}

fn report(k: &Open<'_>, io: &'static str, slot: u32, out: &mut Reported) -> Result<(), Error> {
    let bytes = tensor_bytes(&k.name, io, slot);
    let shape = [bytes.len() / 4];
    let t = TensorRef::host(DType::Float32, &shape, &bytes);
    if io == "input" {
        k.kernel.input(slot, t)?;
    } else {
        k.kernel.output(slot, t)?;
    }
    out.push((k.name.clone(), io, slot));
    Ok(())
}

/// One tensor as found in a dump tree: `(iteration dir, op name, io, slot)`.
pub type Found = (String, String, String, u32);

/// What [`check_tree`] found.
#[derive(Clone, Debug, Default)]
pub struct TreeCheck {
    /// Every `.npy` under a final name (each loaded whole, with the bytes its name implies).
    pub npy: Vec<Found>,
    /// Every `statistic.csv` row (each whole, below a header, with the Max Value its name
    /// implies).
    pub rows: Vec<Found>,
    /// Temporary files left (`.opdump-tmp.*`; none of them named like a final file).
    pub temps: usize,
}

/// Checks the campaign's invariants on the dump tree under `root` and panics with the
/// offending file otherwise: every `.npy` under a final name loads whole and holds the bytes
/// [`tensor_bytes`] gives for its name; every `statistic.csv` starts with its header and has
/// only whole rows, each with the maximum its name implies; every other csv ends with a
/// newline; temporary files never carry a final name; `clean` (a run that was closed, not
/// killed) also allows no temporary file at all.
pub fn check_tree(root: &Path, clean: bool) -> TreeCheck {
    let mut out = TreeCheck::default();
    for e in walk(root).into_iter().filter(|e| !e.is_dir) {
        let name = crate::fsutil::file_name(&e.path);
        let iteration = e
            .path
            .parent()
            .map(crate::fsutil::file_name)
            .unwrap_or_default();
        let at = e.path.display();
        if name.starts_with(TMP_PREFIX) {
            assert!(
                !name.ends_with(".npy") && !name.ends_with(".csv") && !name.ends_with(".json"),
                "{at}: a temporary file named like a final one"
            );
            assert!(!clean, "{at}: temporary file left after close");
            out.temps += 1;
        } else if name.ends_with(".npy") {
            let npy = dump_npy::read_file(&e.path).unwrap_or_else(|err| {
                panic!("{at}: truncated or corrupt under a final name: {err}")
            });
            let f: Vec<&str> = name.split('.').collect();
            assert_eq!(f.len(), 10, "{at}: name form");
            let (op, io, slot) = (f[1], f[5], f[6].parse::<u32>().expect("slot"));
            assert_eq!(npy.dtype, DType::Float32, "{at}");
            assert_eq!(npy.shape, [elems(op, io, slot)], "{at}: shape");
            assert!(
                npy.data == tensor_bytes(op, io, slot),
                "{at}: data bytes differ"
            );
            out.npy
                .push((iteration, op.to_owned(), io.to_owned(), slot));
        } else if name == "statistic.csv" {
            let text = fs::read_to_string(&e.path).unwrap_or_else(|err| panic!("{at}: {err}"));
            let csv = parse_statistic_csv(&text);
            let cols = ["Op Name", "IO", "Slot", "Max Value"].map(|c| csv.col(c));
            for r in &csv.rows {
                let (op, io) = (&r[cols[0]], &r[cols[1]]);
                let slot: u32 = r[cols[2]].parse().expect("slot");
                let v = values(op, io, slot);
                let max = v.last().copied().unwrap_or_default();
                assert_eq!(r[cols[3]].parse::<f32>().ok(), Some(max), "{at}: row {r:?}");
                out.rows
                    .push((iteration.clone(), op.clone(), io.clone(), slot));
            }
        } else if name.ends_with(".csv") {
            let text = fs::read(&e.path).unwrap_or_else(|err| panic!("{at}: {err}"));
            assert!(
                text.is_empty() || text.ends_with(b"\n"),
                "{at}: last line cut"
            );
        }
    }
    out.npy.sort();
    out.rows.sort();
    out
}

/// `reported` (per iteration) as [`Found`] entries, sorted: what a clean run must leave.
pub fn expected(reported: &BTreeMap<u64, Reported>) -> Vec<Found> {
    let mut v: Vec<Found> = reported
        .iter()
        .flat_map(|(it, list)| {
            list.iter()
                .map(move |(op, io, slot)| (it.to_string(), op.clone(), (*io).to_owned(), *slot))
        })
        .collect();
    v.sort();
    v
}
