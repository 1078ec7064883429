//! The command line's [`EventSink`]: the library's events are queued (from whichever thread
//! raised them, under a lock held only for the push) and printed by the command on its own
//! thread, to its own `err` writer, between library calls. No lock is held across a library
//! call, so a writer thread's event can never wait for the printing thread (the deadlock of a
//! process-wide `stderr().lock()` held for the whole run), and a failing stderr only loses lines.

use std::{
    io::Write,
    sync::{Arc, Mutex, PoisonError},
};

use dump_host::diag::EventSink;

/// Events raised so far and not yet printed, as their one-line texts.
#[derive(Clone, Debug, Default)]
pub struct EventQueue(Arc<Mutex<Vec<String>>>);

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink that appends each event's text to this queue.
    pub fn sink(&self) -> EventSink {
        let q = Arc::clone(&self.0);
        EventSink::new(move |e| {
            let line = e.to_string();
            q.lock().unwrap_or_else(PoisonError::into_inner).push(line);
        })
    }

    /// Writes the queued lines to `err` (one per event, errors ignored) and empties the queue.
    pub fn print_to(&self, err: &mut dyn Write) {
        let lines = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for l in lines {
            let _ = writeln!(err, "{l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_host::diag::Event;

    #[test]
    fn events_are_printed_once_in_order() {
        let q = EventQueue::new();
        let s = q.sink();
        for entry in ["a", "b"] {
            s.emit(&Event::UnusedKernel {
                entry: entry.into(),
            });
        }
        let mut err = Vec::new();
        q.print_to(&mut err);
        q.print_to(&mut err);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "[DataDump] Unused Kernel in json: a\n[DataDump] Unused Kernel in json: b\n"
        );
    }
}
