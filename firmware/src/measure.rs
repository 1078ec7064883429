//! Costs measured on the emulated Cortex-M4: instruction counts and stack depth.
//!
//! qemu does not emulate the DWT cycle counter. Run with `-icount shift=0` instead: the
//! virtual clock then advances a fixed time per executed instruction, and SysTick (clocked by
//! the core clock) counts that virtual time. [`Clock::calibrate`] runs a loop of known length
//! (two instructions per iteration) to learn instructions per tick, so a measurement is
//! `ticks * instructions per tick`. These are instructions, not cycles: a real M4 needs about
//! one cycle per instruction for ALU and single-precision FPU work, more for loads (2), taken
//! branches (2-4) and `f64` arithmetic done in software.
//!
//! Stack: [`paint_stack`] fills unused stack below the current frame with a pattern and
//! [`stack_high_water`] finds how deep it was overwritten.

use cortex_m::peripheral::{SYST, syst::SystClkSource};

/// SysTick as a 24-bit down-counting clock.
pub struct Clock {
    _syst: SYST,
}

/// The SysTick reload: the full 24 bits.
const RELOAD: u32 = 0x00FF_FFFF;

impl Clock {
    /// Starts SysTick from the core clock, free running.
    pub fn start(mut syst: SYST) -> Clock {
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_counter();
        Clock { _syst: syst }
    }

    /// Ticks `f` took (at most 2^24 - 1; longer runs wrap).
    pub fn ticks(&self, f: impl FnOnce()) -> u32 {
        let a = SYST::get_current();
        f();
        let b = SYST::get_current();
        a.wrapping_sub(b) & RELOAD
    }

    /// `(ticks, instructions)` of a loop of `iterations` times two instructions.
    pub fn calibrate(&self, iterations: u32) -> (u32, u32) {
        let t = self.ticks(|| spin(iterations));
        (t, 2 * iterations)
    }
}

/// `subs` + `bne`, `n` times.
#[inline(never)]
fn spin(n: u32) {
    if n == 0 {
        return;
    }
    // SAFETY: a register-only countdown loop; it touches no memory and no stack, and leaves
    // the register it was given (declared clobbered through `inout ... => _`).
    unsafe {
        core::arch::asm!(
            "2:",
            "subs {0}, {0}, #1",
            "bne 2b",
            inout(reg) n => _,
            options(nomem, nostack),
        );
    }
}

/// Pattern written into unused stack.
const PAINT: u32 = 0xC0FF_EE11;

/// Bytes below the current stack pointer left alone (this function's own frame and calls).
const GUARD: usize = 256;

/// Paints `len` bytes of stack below the caller's frame; returns the painted region's bounds
/// `(low, high)` for [`stack_high_water`].
#[inline(never)]
pub fn paint_stack(len: usize) -> (usize, usize) {
    let sp = cortex_m::register::msp::read() as usize;
    let high = (sp - GUARD) & !3;
    let low = high - len;
    let mut p = low;
    while p < high {
        // SAFETY: [low, high) lies below the live stack (sp minus a guard larger than this
        // function's frame) and above the statics (RAM is 4 MiB, the stack starts at its top
        // and `len` is a few dozen KiB); nothing else uses it and no interrupt is enabled.
        // Volatile, so the writes are not elided.
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
    (low, high)
}

/// Deepest stack use since [`paint_stack`], in bytes below the stack pointer of the frame that
/// painted (so at most [`GUARD`] bytes more than was used). Saturates at the painted size.
pub fn stack_high_water((low, high): (usize, usize)) -> usize {
    let mut p = low;
    while p < high {
        // SAFETY: the same region [`paint_stack`] wrote, aligned, inside RAM.
        if unsafe { core::ptr::read_volatile(p as *const u32) } != PAINT {
            break;
        }
        p += 4;
    }
    high - p + GUARD
}
