//! The list of problems found in one config: every error and every warning, each with the JSON
//! path it concerns.

use core::fmt;

/// How bad a [`Diagnostic`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The config is accepted, but probably does not do what its author expects.
    Warning,
    /// The config is rejected.
    Error,
}

/// One problem: where (a JSON path such as `common_dump_settings.iteration`), and what.
///
/// For errors MindSpore also reports, `message` starts with MindSpore's exact text and adds
/// the offending value and what is allowed where MindSpore's text lacks them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// JSON path of the key or element concerned (`""` for the whole document).
    pub path: String,
    /// Human-readable description.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        if self.path.is_empty() {
            write!(f, "{sev}: {}", self.message)
        } else {
            write!(f, "{sev}: {}: {}", self.path, self.message)
        }
    }
}

/// Every error and warning found while reading one config, in the order found (which follows
/// MindSpore's parse order, so the first error is the one MindSpore would raise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error at `path`.
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Error, path.into(), message.into());
    }

    /// Records a warning at `path`.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Warning, path.into(), message.into());
    }

    fn push(&mut self, severity: Severity, path: String, message: String) {
        self.items.push(Diagnostic {
            severity,
            path,
            message,
        });
    }

    /// Every diagnostic, in the order found.
    pub fn all(&self) -> &[Diagnostic] {
        &self.items
    }

    /// The errors, in the order found.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter().filter(|d| d.severity == Severity::Error)
    }

    /// The warnings, in the order found.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    /// The first error: the one MindSpore 2.10 would have raised.
    pub fn first_error(&self) -> Option<&Diagnostic> {
        self.errors().next()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_separates_severities() {
        let mut d = Diagnostics::new();
        assert!(d.is_empty() && !d.has_errors() && d.first_error().is_none());
        d.warn("a", "w1");
        d.error("b.c", "e1");
        d.error("", "e2");
        assert!(d.has_errors());
        assert_eq!(d.first_error().unwrap().message, "e1");
        assert_eq!(d.errors().count(), 2);
        assert_eq!(d.warnings().count(), 1);
        assert_eq!(d.to_string(), "warning: a: w1\nerror: b.c: e1\nerror: e2");
    }
}
