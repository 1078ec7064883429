//! Tensor file names exactly as MindSpore 2.10 builds them, hardened against hostile names.
//!
//! `{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`
//! where `op_name` is the full scope name with every `/`, `\`, `.` and space replaced by `_`.

use std::fmt::Write as _;

use dump_core::DType;
pub use dump_stats::csv::Io;

/// Longest file name (bytes, including `.npy`) most file systems accept (NAME_MAX).
pub const NAME_MAX: usize = 255;

/// MindSpore's name sanitising (`/`, `\`, `.`, space become `_`), plus: NUL and other ASCII
/// control characters also become `_`, so a sanitised name never holds `/`, NUL, or `..`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '/' | '\\' | '.' | ' ' => '_',
            c if c.is_ascii_control() => '_',
            c => c,
        })
        .collect()
}

/// How the dtype suffix of file names is spelled: MindSpore's CPU backend writes
/// `Float32` (`TypeIdToString`), GPU and Ascend write `float32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DTypeSpelling {
    /// `Float32`, `BFloat16` (MindSpore on CPU).
    #[default]
    Cpu,
    /// `float32`, `bfloat16` (MindSpore on GPU and Ascend).
    Device,
}

impl DTypeSpelling {
    /// The suffix for `dtype`.
    pub const fn spell(self, dtype: DType) -> &'static str {
        match self {
            DTypeSpelling::Cpu => dtype.cpu_name(),
            DTypeSpelling::Device => dtype.name(),
        }
    }
}

/// The parts of one tensor file name.
#[derive(Clone, Debug)]
pub struct TensorFileName<'a> {
    /// Primitive name (`Conv2D`, `Parameter`); sanitised like the op name.
    pub op_type: &'a str,
    /// Full scope name, unsanitised (`Default/network/conv1-Conv2d/Conv2D-op0`).
    pub full_name: &'a str,
    /// Task id (`0` on CPU/GPU).
    pub task_id: u32,
    /// Stream id (`0` on CPU/GPU).
    pub stream_id: u32,
    /// Microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// Input or output.
    pub io: Io,
    /// Input/output position.
    pub slot: u32,
    /// Data format (`DefaultFormat`, or a device format such as `NC1HWC0`).
    pub format: &'a str,
    /// Element type of the dumped tensor (as named, e.g. `BFloat16` even when widened).
    pub dtype: DType,
    /// Spelling of the dtype suffix.
    pub spelling: DTypeSpelling,
}

impl TensorFileName<'_> {
    /// The full file name, `.npy` included.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(96 + self.full_name.len());
        let _ = write!(
            s,
            "{}.{}.{}.{}.{}.{}.{}.{}.{}.npy",
            sanitize(self.op_type),
            sanitize(self.full_name),
            self.task_id,
            self.stream_id,
            self.timestamp_us,
            self.io.as_str(),
            self.slot,
            sanitize(self.format),
            self.spelling.spell(self.dtype)
        );
        s
    }
}

/// The fields a MindSpore-style `.npy` file name carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpFileName<'a> {
    /// Primitive name (`Conv2D`, `Parameter`).
    pub op_type: &'a str,
    /// Sanitised op name (`Default_network_Conv2D-op0`).
    pub op_name: &'a str,
    /// Task id.
    pub task_id: u64,
    /// Stream id.
    pub stream_id: u64,
    /// Microseconds since the Unix epoch.
    pub timestamp: u64,
    /// Input or output.
    pub io: Io,
    /// Input/output position.
    pub slot: u64,
    /// Data format (`DefaultFormat`).
    pub format: &'a str,
    /// The dtype the name gives (either spelling).
    pub dtype: DType,
}

/// Parses `{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.
/// {dtype}.npy`; `None` when `name` is not of that form.
pub fn parse_file_name(name: &str) -> Option<DumpFileName<'_>> {
    let stem = name.strip_suffix(".npy")?;
    let f: Vec<&str> = stem.split('.').collect();
    let [op_type, op_name, task, stream, ts, io, slot, format, dtype] = f[..] else {
        return None;
    };
    if op_type.is_empty() || op_name.is_empty() || format.is_empty() {
        return None;
    }
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    Some(DumpFileName {
        op_type,
        op_name,
        task_id: num(task)?,
        stream_id: num(stream)?,
        timestamp: num(ts)?,
        io: match io {
            "input" => Io::Input,
            "output" => Io::Output,
            _ => return None,
        },
        slot: num(slot)?,
        format,
        dtype: DType::from_name(dtype).ok()?,
    })
}

/// A deterministic short name for a file name longer than [`NAME_MAX`].
///
/// MindSpore uses `rand_r` seeded by the timestamp, so reruns give different names; opdump
/// uses the first 16 hex digits of the SHA-1 of the long name, so the same long name always
/// maps to the same short one: `opdump-{hex16}.npy`.
pub fn short_name(long_name: &str) -> String {
    let bytes = long_name.as_bytes();
    let digest = dump_core::hash::ms_sha1(DType::UInt8, bytes, bytes.len());
    let hex = dump_core::hash::hex(&digest);
    format!("opdump-{}.npy", &hex.as_str()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_matches_mindspore_and_is_safe() {
        assert_eq!(
            sanitize("Default/network-WithLossCell/_backbone-TinyNet/Add-op0"),
            "Default_network-WithLossCell__backbone-TinyNet_Add-op0"
        );
        assert_eq!(sanitize("moments.fc1.weight"), "moments_fc1_weight");
        assert_eq!(sanitize("a b\\c|d:e-f"), "a_b_c|d:e-f");
        for hostile in ["../../x", "a/b", "x\0y", "..", "/etc/passwd", "\n"] {
            let s = sanitize(hostile);
            assert!(
                !s.contains('/') && !s.contains('\0') && !s.contains(".."),
                "{s}"
            );
        }
    }

    #[test]
    fn file_name_like_reference() {
        let n = TensorFileName {
            op_type: "Conv2D",
            full_name: "Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Conv2D-op0",
            task_id: 0,
            stream_id: 0,
            timestamp_us: 1795332152777873,
            io: Io::Input,
            slot: 0,
            format: "DefaultFormat",
            dtype: DType::Float32,
            spelling: DTypeSpelling::Cpu,
        };
        assert_eq!(
            n.render(),
            "Conv2D.Default_network-WithLossCell__backbone-TinyNet_conv1-Conv2d_Conv2D-op0.0.0.1795332152777873.input.0.DefaultFormat.Float32.npy"
        );
        let gpu = TensorFileName {
            spelling: DTypeSpelling::Device,
            dtype: DType::BFloat16,
            ..n
        };
        assert!(gpu.render().ends_with(".DefaultFormat.bfloat16.npy"));
    }

    #[test]
    fn short_names_are_deterministic() {
        let long = "x".repeat(300);
        assert_eq!(short_name(&long), short_name(&long));
        assert_ne!(short_name(&long), short_name(&"y".repeat(300)));
        assert_eq!(short_name(&long).len(), "opdump-".len() + 16 + 4);
    }
}
