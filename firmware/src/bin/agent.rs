//! Boots on qemu's mps2-an386 (Cortex-M4), runs the agent demo (a small network, every
//! operator's statistics streamed as wire frames to `target/agent-stream.bin` on the host, a
//! path relative to qemu's working directory), prints what it sent and the measured costs,
//! and exits non-zero on any failure. `cargo xtask agent-qemu` runs it.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use dump_core_firmware::{
    agent_run::{self, STEPS},
    measure::{self, Clock},
    net::{Activations, Weights},
    semihosting_file::HostFile,
};
use panic_semihosting as _;

/// Where the stream goes (NUL-terminated for semihosting).
const STREAM_PATH: &str = "target/agent-stream.bin\0";

#[entry]
fn main() -> ! {
    let ok = run();
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Only reached if the host ignored the semihosting exit request.
    loop {
        cortex_m::asm::bkpt();
    }
}

fn run() -> bool {
    let Some(peripherals) = cortex_m::Peripherals::take() else {
        hprintln!("FAIL peripherals already taken");
        return false;
    };
    let clock = Clock::start(peripherals.SYST);
    let Ok(mut file) = HostFile::create(STREAM_PATH) else {
        hprintln!(
            "FAIL cannot create {} on the host",
            STREAM_PATH.trim_end_matches('\0')
        );
        return false;
    };
    // The network's weights and activations live in this frame, outside the measured stack.
    let weights = Weights::seeded(agent_run::WEIGHT_SEED);
    let mut act = Activations::ZERO;
    let painted = measure::paint_stack(32 * 1024);
    let mut result = None;
    let ticks = clock.ticks(|| result = Some(agent_run::stream(&mut file, &weights, &mut act)));
    let stack = measure::stack_high_water(painted);
    let streamed = match result {
        Some(Ok(s)) => s,
        other => {
            hprintln!("FAIL agent stream: {:?}", other);
            return false;
        }
    };
    let Ok(bytes) = file.close() else {
        hprintln!("FAIL closing the stream file");
        return false;
    };
    hprintln!(
        "agent: {} steps run, {} dumped, {} stat frames, {} dropped, {} bytes, stack {} bytes below main",
        STEPS,
        streamed.steps,
        streamed.records,
        streamed.dropped,
        bytes,
        stack
    );
    hprintln!("measure stream ticks={} units={}", ticks, STEPS);
    agent_run::measure(&clock);
    streamed.dropped == 0
}
