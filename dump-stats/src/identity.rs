//! Which tensor of which kernel launch: the one identity every dialect's file name, csv row,
//! wire record and read-back record carries ([`TensorId`]).
//!
//! `S` is the string type of the two names: `&str` where a name is borrowed (rendering a file
//! name or a row), `String` where a record owns it (a dump read back).
//!
//! ```
//! use dump_stats::{Io, TensorId};
//!
//! let id = TensorId {
//!     op_type: "Add",
//!     op_name: "Default_Add-op0",
//!     task_id: 0,
//!     stream_id: 0,
//!     timestamp: 1795332154537630,
//!     io: Io::Output,
//!     slot: 1,
//! };
//! assert_eq!(id.io_slot().to_string(), "output.1");
//! # #[cfg(feature = "alloc")]
//! assert_eq!(id.to_owned().as_str(), id);
//! ```

use core::fmt;

/// Whether a tensor is a kernel input or output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Io {
    /// `input`.
    #[default]
    Input,
    /// `output`.
    Output,
}

impl Io {
    /// `input` or `output`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Io::Input => "input",
            Io::Output => "output",
        }
    }

    /// `"input"` → `Input`, `"output"` → `Output`, anything else `None`.
    pub fn parse(s: &str) -> Option<Io> {
        match s {
            "input" => Some(Io::Input),
            "output" => Some(Io::Output),
            _ => None,
        }
    }
}

impl fmt::Display for Io {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tensor of one kernel launch: op type and name, where it ran (task, stream), when
/// (timestamp, µs), and which input or output slot it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TensorId<S> {
    /// Primitive name (`Conv2D`, `Parameter`, `Gradient`).
    pub op_type: S,
    /// The op's name: its full scope name where it is given to a writer, the sanitised form
    /// (`Default_network_Conv2D-op0`) where it is read from a file name or a row.
    pub op_name: S,
    /// Task id (`0` on CPU/GPU).
    pub task_id: u32,
    /// Stream id (`0` on CPU/GPU).
    pub stream_id: u32,
    /// Microseconds since the Unix epoch; tensors are stamped in the order kernels ran.
    pub timestamp: u64,
    /// Input or output.
    pub io: Io,
    /// Input/output position.
    pub slot: u32,
}

impl<S: AsRef<str>> TensorId<S> {
    /// The same identity with borrowed names.
    pub fn as_str(&self) -> TensorId<&str> {
        TensorId {
            op_type: self.op_type.as_ref(),
            op_name: self.op_name.as_ref(),
            task_id: self.task_id,
            stream_id: self.stream_id,
            timestamp: self.timestamp,
            io: self.io,
            slot: self.slot,
        }
    }

    /// The same identity with owned names.
    #[cfg(feature = "alloc")]
    pub fn to_owned(&self) -> TensorId<alloc::string::String> {
        TensorId {
            op_type: self.op_type.as_ref().into(),
            op_name: self.op_name.as_ref().into(),
            task_id: self.task_id,
            stream_id: self.stream_id,
            timestamp: self.timestamp,
            io: self.io,
            slot: self.slot,
        }
    }

    /// `input.0`, `output.1` (displays without allocating).
    pub fn io_slot(&self) -> IoSlot {
        IoSlot(self.io, self.slot)
    }
}

/// `input.0`: an [`Io`] and its slot, as file names and reports spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoSlot(pub Io, pub u32);

impl fmt::Display for IoSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0.as_str(), self.1)
    }
}
