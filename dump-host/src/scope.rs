//! A step scope for adapters: the per-step state of a runtime adapter (the [`Step`] it dumps
//! into, its kernel counter, its first error, ...) made reachable from anywhere on the calling
//! thread while the step runs, without threading a handle through the model's code.
//!
//! An adapter names its state with a marker type implementing [`StepScope`], runs the step's
//! body inside [`enter`], and reaches the state from a module wrapper or a `tap` with [`with`]
//! (or asks [`is_active`] first, the cheap test a hook makes before building a kernel name).
//! Scopes of different markers are independent, and a scope entered inside another of the same
//! marker shadows it until it ends; the previous scope comes back when [`enter`] returns or
//! unwinds.
//!
//! The state lives on the stack of the [`enter`] call; [`with`] hands out a reference that
//! cannot outlive the callback, so nothing here allocates or needs the state to be `'static`.
//!
//! [`Step`]: crate::Step
//!
//! ```
//! use std::cell::Cell;
//! use dump_host::scope::{self, StepScope};
//!
//! /// The per-step state of a (toy) adapter: a kernel counter.
//! struct Counter<'a> { prefix: &'a str, seq: Cell<usize> }
//! struct MyAdapter;
//! impl StepScope for MyAdapter {
//!     type Active<'a> = Counter<'a>;
//! }
//!
//! /// What a layer hook does: number the kernel, or nothing outside a step.
//! fn next_name() -> Option<String> {
//!     scope::with::<MyAdapter, _>(|c| {
//!         let n = c.seq.get();
//!         c.seq.set(n + 1);
//!         format!("{}{n}", c.prefix)
//!     })
//! }
//!
//! let state = Counter { prefix: "Default/fc/Linear-op", seq: Cell::new(0) };
//! let names = scope::enter::<MyAdapter, _>(&state, || [next_name(), next_name()]);
//! assert_eq!(names, [Some("Default/fc/Linear-op0".into()), Some("Default/fc/Linear-op1".into())]);
//! assert_eq!(next_name(), None); // the step is over
//! ```

use std::{
    any::TypeId,
    cell::Cell,
    ptr::{self, NonNull},
};

/// Names the per-step state of one adapter. The marker type itself is never built; its
/// [`TypeId`] keeps the scopes of different adapters (dump-candle inside a dump-burn step, say)
/// apart.
pub trait StepScope: 'static {
    /// The state a step makes reachable, borrowed from the stack of [`enter`] for the step's
    /// duration (its lifetime parameter lets it borrow the [`Step`](crate::Step) and the
    /// adapter's own fields).
    type Active<'a>;
}

/// One entered scope, on the stack of its [`enter`] call; the scopes of a thread form a list
/// from the innermost.
struct Frame {
    key: TypeId,
    active: NonNull<()>,
    outer: *const Frame,
}

thread_local! {
    /// The innermost scope entered on this thread (null outside every scope). Points at a
    /// `Frame` on the stack of an [`enter`] call; that call's guard restores the previous value
    /// before the frame dies.
    static INNERMOST: Cell<*const Frame> = const { Cell::new(ptr::null()) };
}

/// Restores the previous innermost scope on drop, also when the step's body unwinds.
struct Restore(*const Frame);

impl Drop for Restore {
    fn drop(&mut self) {
        INNERMOST.with(|c| c.set(self.0));
    }
}

/// Runs `body` with `active` reachable through [`with::<S, _>`](with) on this thread, and
/// returns its result. When `body` returns or unwinds, the scope that was current before (of
/// any marker) is current again.
pub fn enter<S: StepScope, R>(active: &S::Active<'_>, body: impl FnOnce() -> R) -> R {
    let frame = Frame {
        key: TypeId::of::<S>(),
        active: NonNull::from(active).cast(),
        outer: INNERMOST.with(Cell::get),
    };
    let _restore = Restore(frame.outer);
    INNERMOST.with(|c| c.set(&frame));
    body()
}

/// The innermost entered scope of marker `S` on this thread, as a type-erased pointer.
fn find<S: StepScope>() -> Option<NonNull<()>> {
    let key = TypeId::of::<S>();
    let mut p = INNERMOST.with(Cell::get);
    while !p.is_null() {
        // SAFETY: a non-null `INNERMOST` (and every `outer` link below it) points at a `Frame`
        // on the stack of an `enter` call that has not returned: `enter` links its frame in
        // only for the duration of `body`, and its `Restore` guard unlinks it (returning or
        // unwinding) before the frame is dropped. Frames of outer calls outlive inner ones, and
        // the list is only read on this thread (it is thread-local).
        let frame = unsafe { &*p };
        if frame.key == key {
            return Some(frame.active);
        }
        p = frame.outer;
    }
    None
}

/// Whether a scope of marker `S` is entered on this thread: a thread-local read and a walk
/// over the entered scopes (one, usually).
pub fn is_active<S: StepScope>() -> bool {
    find::<S>().is_some()
}

/// Runs `f` with the state of the innermost scope of marker `S` entered on this thread;
/// `None` (and `f` not run) outside every such scope.
///
/// `f` must work for any lifetime of the state (it is higher-ranked over it), so it can
/// neither keep the reference nor store a shorter-lived borrow into the state.
pub fn with<S: StepScope, R>(f: impl for<'r, 'a> FnOnce(&'r S::Active<'a>) -> R) -> Option<R> {
    let p = find::<S>()?;
    // SAFETY: `find::<S>` returns the pointer that `enter::<S, _>` made from a live
    // `&S::Active<'_>` (frames of the same `TypeId` come only from `enter::<S, _>`, so the
    // pointee has that type up to its lifetime); the frame is linked only while that `enter`
    // call's `body` runs, and `f` runs inside it on this thread, so the state outlives `f`.
    // The `'static` written here is never observed: `f` is generic over the lifetime, so it
    // cannot rely on it, keep the reference past its return, or store a borrow shorter than
    // the real one.
    // Only shared references are made, as `enter` took a shared one.
    let active = unsafe { p.cast::<S::Active<'static>>().as_ref() };
    Some(f(active))
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    struct A;
    impl StepScope for A {
        type Active<'a> = Cell<u32>;
    }

    struct B;
    impl StepScope for B {
        type Active<'a> = RefCell<&'a mut Vec<String>>;
    }

    fn read_a() -> Option<u32> {
        with::<A, _>(Cell::get)
    }

    #[test]
    fn nothing_is_active_outside_a_scope() {
        assert!(!is_active::<A>());
        assert_eq!(read_a(), None);
        let mut ran = false;
        assert!(with::<B, _>(|_| ran = true).is_none());
        assert!(!ran, "f must not run outside a scope");
    }

    #[test]
    fn the_state_is_reachable_inside_and_gone_after() {
        let a = Cell::new(7);
        let got = enter::<A, _>(&a, || {
            assert!(is_active::<A>());
            with::<A, _>(|c| c.set(c.get() + 1));
            read_a()
        });
        assert_eq!(got, Some(8));
        assert_eq!(a.get(), 8, "the state written in the scope is the caller's");
        assert_eq!(read_a(), None);
    }

    #[test]
    fn inner_scopes_shadow_and_restore() {
        let (outer, inner) = (Cell::new(1), Cell::new(2));
        let seen = enter::<A, _>(&outer, || {
            let in_inner = enter::<A, _>(&inner, read_a);
            (in_inner, read_a())
        });
        assert_eq!(seen, (Some(2), Some(1)));
    }

    #[test]
    fn markers_are_independent() {
        let a = Cell::new(3);
        let mut log = Vec::new();
        enter::<A, _>(&a, || {
            let b = RefCell::new(&mut log);
            enter::<B, _>(&b, || {
                // A's scope is found under B's.
                let v = read_a();
                with::<B, _>(|l| l.borrow_mut().push(format!("{v:?}")));
            });
            assert!(!is_active::<B>(), "B ended");
            assert!(is_active::<A>());
        });
        assert_eq!(log, ["Some(3)"]);
    }

    #[test]
    fn a_panicking_body_leaves_no_scope_behind() {
        let a = Cell::new(5);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            enter::<A, _>(&a, || panic!("the model's forward failed"))
        }));
        assert!(r.is_err());
        assert!(
            !is_active::<A>(),
            "the unwinding restored the empty scope list"
        );
        assert_eq!(read_a(), None);
    }

    #[test]
    fn scopes_are_per_thread() {
        let a = Cell::new(9);
        enter::<A, _>(&a, || {
            let other = std::thread::spawn(is_active::<A>).join().unwrap();
            assert!(!other);
            assert!(is_active::<A>());
        });
    }
}
