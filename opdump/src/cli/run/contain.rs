//! A runtime's panic, contained: [`contained`] runs a runtime call under `catch_unwind` and
//! turns a panic into the panic's message (with where it happened), and keeps the default
//! panic hook from printing the panic for the contained call only. The hook is installed once
//! per process and defers to the previous hook for every other panic.

use std::{
    cell::{Cell, RefCell},
    panic::{self, AssertUnwindSafe},
    sync::Once,
};

thread_local! {
    /// A contained call is running on this thread.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// The last contained panic's message and location.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) {
                let at = info
                    .location()
                    .map(|l| format!(" (at {}:{})", l.file(), l.line()))
                    .unwrap_or_default();
                let text = payload_text(info.payload());
                LAST.with(|l| *l.borrow_mut() = Some(format!("{text}{at}")));
            } else {
                previous(info);
            }
        }));
    });
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs `f`; a panic inside it comes back as `Err(message)` and is not printed.
pub(crate) fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install();
    let was = QUIET.with(|q| q.replace(true));
    LAST.with(|l| l.borrow_mut().take());
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(|p| {
        LAST.with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| payload_text(p.as_ref()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_location() {
        let e = contained(|| -> u32 { panic!("Gemm: no bias at node {}", 7) }).unwrap_err();
        assert!(e.starts_with("Gemm: no bias at node 7 (at "), "{e}");
        assert!(e.contains("contain.rs:"), "{e}");
        assert_eq!(contained(|| 5), Ok(5));
        // A static message too, and the hook is quiet again afterwards.
        let e = contained(|| -> () { panic!("static") }).unwrap_err();
        assert!(e.starts_with("static"), "{e}");
        assert!(!QUIET.with(Cell::get));
    }
}
