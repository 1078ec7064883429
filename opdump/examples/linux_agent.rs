//! A Linux device agent: the same `dump_core::agent` library the Cortex-M4 firmware uses, with a
//! TCP socket as its sink, for edge boxes whose disk is slow or absent. It runs the firmware's
//! small f32 network (`firmware/src/net.rs`: conv, relu, dense layers, softmax; 8 steps, 6
//! dumped, MD5s and 16-byte samples) and streams every operator's statistics to
//! `opdump ingest` listening on ADDR.
//!
//! ```sh
//! opdump ingest tcp://127.0.0.1:7070 --config data_dump.json --out ./edge-dump &
//! cargo run -p opdump --example linux_agent -- 127.0.0.1:7070
//! ```
//!
//! The stream it sends is byte for byte the one the qemu agent writes (same network, same
//! plan, session 1), except for the hello frame's device name.

#[path = "../../firmware/src/net.rs"]
#[allow(dead_code)]
mod net;

use std::{io::Write, net::TcpStream};

use dump_core::{
    DType,
    agent::{Agent, Plan, Sink},
};

/// The firmware's plan: steps 0, 2, 3, 5, 6 and 7 of 8, every kernel, 16 sample bytes.
const ITERATIONS: &str = "0|2-3|5-7";
const STEPS: u32 = 8;
const SAMPLE: u16 = 16;
const WEIGHT_SEED: u32 = 0x0BAD_5EED;

/// The socket as the agent's byte sink (buffered: one `write` per frame would be a syscall).
struct Tcp(std::io::BufWriter<TcpStream>);

impl Sink for Tcp {
    type Error = std::io::ErrorKind;
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.0.write_all(bytes).map_err(|e| e.kind())
    }
}

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7070".to_owned());
    let addr = addr.strip_prefix("tcp://").unwrap_or(&addr).to_owned();
    if let Err(e) = run(&addr) {
        eprintln!("linux_agent: {e}");
        std::process::exit(1);
    }
}

/// Connects to `addr` and streams the network's 8 steps (the plan dumps 6 of them); also run by
/// `opdump/tests/linux_agent.rs` against `opdump ingest`.
pub(crate) fn run(addr: &str) -> Result<(), String> {
    let sock = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let plan = Plan::new(ITERATIONS, &[])
        .map_err(|e| format!("plan: {e}"))?
        .with_md5(true)
        .with_sample(SAMPLE);
    let mut agent = Agent::new(Tcp(std::io::BufWriter::new(sock)), plan);
    let fail = |e| format!("sending to {addr}: {e:?}");
    agent
        .hello(1, "opdump-agent 0.1", "linux x86_64 example")
        .map_err(fail)?;
    agent.begin_graph(0, &net::KERNELS).map_err(fail)?;
    let weights = net::Weights::seeded(WEIGHT_SEED);
    let mut act = net::Activations::ZERO;
    let (mut records, mut dropped) = (0, 0);
    for step in 0..STEPS {
        let x = net::input(step);
        agent.begin_step(step).map_err(fail)?;
        net::run(&weights, &x, &mut act, |k, tensors| {
            let (op_type, op_name) = net::KERNELS[k];
            let Some(mut kernel) = agent.kernel_at(k, op_type, op_name) else {
                return;
            };
            for t in tensors {
                let bytes: &[u8] = bytemuck::cast_slice(t.data);
                // A failed send is counted by the agent (end-step's `dropped`).
                let _ = if t.output {
                    kernel.output(t.slot, DType::Float32, t.shape, bytes)
                } else {
                    kernel.input(t.slot, DType::Float32, t.shape, bytes)
                };
            }
        });
        if let Some(end) = agent.end_step().map_err(fail)? {
            records += end.records;
            dropped += end.dropped;
        }
    }
    let mut sink = agent.into_sink();
    sink.0
        .flush()
        .map_err(|e| format!("sending to {addr}: {e}"))?;
    eprintln!("linux_agent: {records} stat records sent to {addr}, {dropped} dropped");
    Ok(())
}
