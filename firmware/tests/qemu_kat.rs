//! Boots on qemu's mps2-an386 (Cortex-M4), runs the known-answer tests of dump-core, dump-npy
//! and dump-stats, prints `N passed, N failed` through semihosting and exits non-zero if any
//! check failed.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;

#[entry]
fn main() -> ! {
    let t = dump_core_firmware::run_all();
    hprintln!("{} passed, {} failed", t.passed, t.failed);
    debug::exit(if t.failed == 0 {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Only reached if the host ignored the semihosting exit request.
    loop {
        cortex_m::asm::bkpt();
    }
}
