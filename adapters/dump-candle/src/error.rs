//! The one error type of `dump-candle`.

use core::fmt;

/// What can go wrong while dumping a candle model.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Dumper failed (a bad tensor, write failures, an unusable config).
    Dump(dump_host::Error),
    /// candle failed while running the model (the ONNX evaluator).
    Candle(candle_core::Error),
    /// A tensor cannot be handed to the Dumper: its dtype or device has no dump mapping
    /// (what is not supported and what is).
    Unsupported(String),
    /// The model cannot be dumped as given (the ONNX evaluator: no graph, a node without
    /// outputs, a missing input).
    Model(String),
    /// candle-onnx could not evaluate the model: it returned an error or panicked (the panic
    /// is caught), at the node named when it could be found.
    Eval {
        /// The first node whose evaluation fails, when found.
        node: Option<Box<NodeAt>>,
        /// What candle-onnx said.
        cause: Box<EvalCause>,
    },
}

/// A node of an ONNX graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAt {
    /// Index in the graph's node list.
    pub index: usize,
    /// The node's name (may be empty in the model).
    pub name: String,
    /// The node's op type (`Gemm`).
    pub op_type: String,
}

/// Why candle-onnx's evaluation stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum EvalCause {
    /// candle returned an error.
    Candle(candle_core::Error),
    /// candle-onnx panicked (the panic's message).
    Panic(String),
}

impl fmt::Display for NodeAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            write!(f, "node #{} ({}, unnamed)", self.index, self.op_type)
        } else {
            write!(
                f,
                "node {:?} ({}, #{})",
                self.name, self.op_type, self.index
            )
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dump(e) => write!(f, "dump: {e}"),
            Error::Candle(e) => write!(f, "candle: {}", Plain(e)),
            Error::Unsupported(m) => f.write_str(m),
            Error::Model(m) => write!(f, "model: {m}"),
            Error::Eval { node, cause } => {
                let verb = match **cause {
                    EvalCause::Candle(_) => "failed",
                    EvalCause::Panic(_) => "panicked (caught)",
                };
                match node {
                    Some(n) => write!(f, "candle-onnx {verb} at {n}: ")?,
                    None => write!(f, "candle-onnx {verb}: ")?,
                }
                match &**cause {
                    EvalCause::Candle(e) => write!(f, "{}", Plain(e)),
                    EvalCause::Panic(m) => f.write_str(m),
                }
            }
        }
    }
}

/// candle's error as its message, without the backtrace candle attaches to it when
/// `RUST_BACKTRACE` is set (a command-line user reads what failed, not candle's frames; the
/// error itself, backtrace included, stays reachable through `source()`).
pub(crate) struct Plain<'a>(pub(crate) &'a candle_core::Error);

impl fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use candle_core::Error as E;
        match self.0 {
            E::WithBacktrace { inner, .. } => Plain(inner).fmt(f),
            E::Context { inner, context } => write!(f, "{context}\n{}", Plain(inner)),
            E::WithPath { inner, path } => write!(f, "path: {path:?} {}", Plain(inner)),
            e => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Dump(e) => Some(e),
            Error::Candle(e) => Some(e),
            Error::Eval { cause, .. } => match &**cause {
                EvalCause::Candle(e) => Some(e),
                EvalCause::Panic(_) => None,
            },
            _ => None,
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Candle(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a backtrace captured (as `RUST_BACKTRACE=1` makes candle do), the message is the
    /// same as without one, at any depth.
    #[test]
    fn messages_leave_out_candle_backtraces() {
        let bare = candle_core::Error::Msg("shape mismatch".into());
        let traced = candle_core::Error::WithBacktrace {
            inner: Box::new(candle_core::Error::Msg("shape mismatch".into())),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert!(
            traced.to_string().lines().count() > 1,
            "candle prints the frames"
        );
        let node = NodeAt {
            index: 3,
            name: "node_view".into(),
            op_type: "Reshape".into(),
        };
        let eval = |e| Error::Eval {
            node: Some(Box::new(node.clone())),
            cause: Box::new(EvalCause::Candle(e)),
        };
        let want = "candle-onnx failed at node \"node_view\" (Reshape, #3): shape mismatch";
        assert_eq!(eval(bare).to_string(), want);
        assert_eq!(eval(traced).to_string(), want);
        let wrapped = candle_core::Error::Context {
            inner: Box::new(candle_core::Error::WithBacktrace {
                inner: Box::new(candle_core::Error::Msg("bad".into())),
                backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
            }),
            context: Box::new("loading w"),
        };
        assert_eq!(Error::Candle(wrapped).to_string(), "candle: loading w\nbad");
    }
}
