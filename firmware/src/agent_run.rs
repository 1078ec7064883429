//! The agent demo: runs [`crate::net`] for a few steps and streams every operator's statistics
//! with dump-core's [`Agent`]; then measures what the agent costs.

use crate::{
    measure::Clock,
    net::{self, Activations, KERNELS, Weights},
};
use cortex_m_semihosting::hprintln;
use dump_core::{
    DType,
    agent::{Agent, AgentError, Plan, Sink},
    hash::Md5Stream,
    stats::{summarize, summarize_hashed},
};

/// Seed of the network's weights.
pub const WEIGHT_SEED: u32 = 0x0BAD_5EED;

/// Steps the demo runs.
pub const STEPS: u32 = 8;

/// The demo's plan: steps 0, 2-3 and 5-7 (step 1 and 4 cost a flag test per kernel), every
/// kernel, inputs and outputs, MD5 and a 16-byte sample of every tensor.
pub const ITERATIONS: &str = "0|2-3|5-7";

/// Sample bytes per tensor.
pub const SAMPLE: u16 = 16;

/// Session tag of the demo's hello.
pub const SESSION: u32 = 1;

/// Counts of one streamed run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Streamed {
    /// Stat frames sent.
    pub records: u32,
    /// Tensors that could not be sent.
    pub dropped: u32,
    /// Steps dumped.
    pub steps: u32,
}

fn bytes(data: &[f32]) -> &[u8] {
    bytemuck::cast_slice(data)
}

/// Runs the network (`weights`, activations in `act`) for [`STEPS`] steps with the agent
/// writing to `sink`.
pub fn stream<S: Sink>(
    sink: S,
    weights: &Weights,
    act: &mut Activations,
) -> Result<Streamed, AgentError<S::Error>>
where
    S::Error: core::fmt::Debug,
{
    let plan = Plan::new(ITERATIONS, &[])?
        .with_md5(true)
        .with_sample(SAMPLE);
    let mut agent = Agent::new(sink, plan);
    agent.hello(SESSION, "opdump-agent 0.1", "cortex-m4 qemu mps2-an386")?;
    agent.begin_graph(0, &KERNELS)?;
    let mut out = Streamed::default();
    for step in 0..STEPS {
        let x = net::input(step);
        agent.begin_step(step)?;
        let mut first_error = None;
        net::run(weights, &x, act, |k, tensors| {
            let (op_type, op_name) = KERNELS[k];
            let Some(mut kernel) = agent.kernel_at(k, op_type, op_name) else {
                return;
            };
            for t in tensors {
                let sent = if t.output {
                    kernel.output(t.slot, DType::Float32, t.shape, bytes(t.data))
                } else {
                    kernel.input(t.slot, DType::Float32, t.shape, bytes(t.data))
                };
                if let Err(e) = sent {
                    first_error.get_or_insert(e);
                }
            }
        });
        if let Some(e) = first_error {
            hprintln!("agent: step {} lost a record: {:?}", step, e);
        }
        if let Some(end) = agent.end_step()? {
            out.records += end.records;
            out.dropped += end.dropped;
            out.steps += 1;
        }
    }
    Ok(out)
}

/// A sink that only counts.
struct Null(u64);

impl Sink for Null {
    type Error = core::convert::Infallible;
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.0 += bytes.len() as u64;
        Ok(())
    }
}

/// Elements of the statistics measurement.
const N: usize = 16384;

/// Prints `measure NAME ticks=T units=U` lines (and the calibration) for the host to turn into
/// instructions per element / per call.
pub fn measure(clock: &Clock) {
    let (t, i) = clock.calibrate(1_000_000);
    hprintln!("measure calibrate ticks={} insns={}", t, i);

    let mut data = [0.0f32; N];
    let mut r = net::Rng(7);
    for v in data.iter_mut() {
        *v = r.next_f32();
    }
    let b = bytes(&data);
    let mut ok = true;
    let t = clock.ticks(|| {
        ok &= matches!(
            summarize(DType::Float32, core::hint::black_box(b), N),
            Ok(Some(_))
        )
    });
    hprintln!("measure stats_f32 ticks={} units={}", t, N);
    let t = clock.ticks(|| {
        let mut md5 = Md5Stream::new();
        ok &= matches!(
            summarize_hashed(
                DType::Float32,
                core::hint::black_box(b),
                N,
                Some(&mut md5),
                None
            ),
            Ok(Some(_))
        );
        core::hint::black_box(md5.finish());
    });
    hprintln!("measure stats_md5_f32 ticks={} units={}", t, N);
    let halves: &[u8] = &b[..N];
    let t = clock
        .ticks(|| ok &= summarize(DType::BFloat16, core::hint::black_box(halves), N / 2).is_ok());
    hprintln!("measure stats_bf16 ticks={} units={}", t, N / 2);

    // One stat frame of a 64-element tensor (statistics, record, CRC, COBS; a counting sink).
    let plan = Plan::new("all", &["MatMul"]).unwrap_or(Plan::all());
    let mut agent = Agent::new(Null(0), plan);
    let _ = agent.begin_graph(0, &KERNELS);
    let _ = agent.begin_step(0);
    const FRAMES: u32 = 100;
    let small = &b[..256];
    let t = clock.ticks(|| {
        for _ in 0..FRAMES {
            if let Some(mut k) = agent.kernel("MatMul", core::hint::black_box(KERNELS[2].1)) {
                ok &= k.output(0, DType::Float32, &[64], small).is_ok();
            }
        }
    });
    hprintln!("measure frame_64 ticks={} units={}", t, FRAMES);
    // An unwanted kernel in a dumped step: the plan's compares.
    const CALLS: u32 = 10_000;
    let t = clock.ticks(|| {
        for _ in 0..CALLS {
            ok &= agent
                .kernel("ReLU", core::hint::black_box(KERNELS[1].1))
                .is_none();
        }
    });
    hprintln!("measure unwanted_kernel ticks={} units={}", t, CALLS);
    let t = clock.ticks(|| {
        for _ in 0..CALLS {
            let i = core::hint::black_box(1);
            ok &= agent.kernel_at(i, "ReLU", KERNELS[1].1).is_none();
        }
    });
    hprintln!("measure unwanted_kernel_at ticks={} units={}", t, CALLS);
    // Any kernel in a step the plan does not dump.
    let mut agent = Agent::new(Null(0), Plan::new("0", &[]).unwrap_or(Plan::all()));
    let _ = agent.begin_step(1);
    let t = clock.ticks(|| {
        for _ in 0..CALLS {
            ok &= agent
                .kernel("MatMul", core::hint::black_box(KERNELS[2].1))
                .is_none();
        }
    });
    hprintln!("measure unwanted_step ticks={} units={}", t, CALLS);
    // The empty loop around the calls, to subtract.
    let t = clock.ticks(|| {
        for _ in 0..CALLS {
            core::hint::black_box(KERNELS[2].1);
        }
    });
    hprintln!("measure empty_loop ticks={} units={}", t, CALLS);
    if !ok {
        hprintln!("FAIL a measured call did not do what it should");
    }
}
