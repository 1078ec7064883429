//! Progress of long work: an `indicatif` bar on stderr when stderr is a terminal; otherwise
//! nothing while working (the command prints one summary line at the end).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress reporter for `total` items.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar titled `what` when stderr is a terminal (and `enabled`), else a silent one.
    pub fn new(what: &str, total: usize, enabled: bool) -> Progress {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed})")
            {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_message(what.to_owned());
            b
        });
        Progress { bar }
    }

    /// `done` of the items are finished.
    pub fn set(&self, done: usize) {
        if let Some(b) = &self.bar {
            b.set_position(done as u64);
        }
    }

    /// Sets the total once it is known.
    pub fn set_len(&self, total: usize) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
