//! Tensor file names exactly as MindSpore 2.10 builds them, hardened against hostile names.
//!
//! `{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`
//! where `op_name` is the full scope name with every `/`, `\`, `.` and space replaced by `_`.

use alloc::{format, string::String};
use core::fmt::Write as _;

use dump_core::DType;

use crate::{Io, TensorId};

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

/// One tensor file name: the single codec of the dump layout. The Dumper [`render`]s it, and
/// every reader (`opdump stats`, the dump reader) [`parse`]s it, so what is written is what is
/// read back: `parse(render(n)) == n` for every name whose text fields are already sanitised
/// (the proptest below), and `render(parse(s)) == s` for every valid name `s`.
///
/// [`render`]: TensorFileName::render
/// [`parse`]: TensorFileName::parse
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorFileName<'a> {
    /// Op type, op name, task, stream, timestamp, io and slot. [`render`] sanitises the op
    /// type and name (`Default/network/Conv2D-op0` becomes `Default_network_Conv2D-op0`);
    /// [`parse`] gives the sanitised forms found in the file name.
    ///
    /// [`render`]: TensorFileName::render
    /// [`parse`]: TensorFileName::parse
    pub id: TensorId<&'a str>,
    /// Data format (`DefaultFormat`, or a device format such as `NC1HWC0`).
    pub format: &'a str,
    /// Element type of the dumped tensor (as named, e.g. `BFloat16` even when widened).
    pub dtype: DType,
    /// Spelling of the dtype suffix.
    pub spelling: DTypeSpelling,
}

impl<'a> TensorFileName<'a> {
    /// The full file name, `.npy` included:
    /// `{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`
    /// with `op_type`, `op_name` and `format` sanitised ([`sanitize`]).
    pub fn render(&self) -> String {
        let id = &self.id;
        let mut s = String::with_capacity(96 + id.op_name.len());
        let _ = write!(
            s,
            "{}.{}.{}.{}.{}.{}.{}.{}.{}.npy",
            sanitize(id.op_type),
            sanitize(id.op_name),
            id.task_id,
            id.stream_id,
            id.timestamp,
            id.io.as_str(),
            id.slot,
            sanitize(self.format),
            self.spelling.spell(self.dtype)
        );
        s
    }

    /// Parses a name of the form [`render`](TensorFileName::render) writes (either dtype
    /// spelling; the spelling found is kept). `None` when `name` is not of that form: wrong
    /// field count, an empty text field, a number field that is not plain decimal digits or
    /// overflows, an IO other than `input`/`output`, or an unknown dtype.
    pub fn parse(name: &'a str) -> Option<TensorFileName<'a>> {
        let stem = name.strip_suffix(".npy")?;
        let mut it = stem.split('.');
        let mut next = || it.next();
        let (op_type, op_name) = (next()?, next()?);
        let (task, stream, ts, io, slot) = (next()?, next()?, next()?, next()?, next()?);
        let (format, dtype) = (next()?, next()?);
        if next().is_some() || op_type.is_empty() || op_name.is_empty() || format.is_empty() {
            return None;
        }
        let dtype_parsed = DType::from_name(dtype).ok()?;
        Some(TensorFileName {
            id: TensorId {
                op_type,
                op_name,
                task_id: decimal(task)?,
                stream_id: decimal(stream)?,
                timestamp: decimal(ts)?,
                io: Io::parse(io)?,
                slot: decimal(slot)?,
            },
            format,
            dtype: dtype_parsed,
            spelling: if dtype == dtype_parsed.cpu_name() {
                DTypeSpelling::Cpu
            } else {
                DTypeSpelling::Device
            },
        })
    }
}

/// A plain decimal number (ASCII digits only: no sign, no spaces) that fits `T`.
fn decimal<T: core::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
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
            id: TensorId {
                op_type: "Conv2D",
                op_name: "Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Conv2D-op0",
                task_id: 0,
                stream_id: 0,
                timestamp: 1795332152777873,
                io: Io::Input,
                slot: 0,
            },
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

    #[test]
    fn parses_mindspore_names_in_both_spellings() {
        let n = "Conv2D.Default_network-WithLossCell__backbone-TinyNet_conv1-Conv2d_Conv2D-op0.0.0.1795332152777873.input.1.DefaultFormat.Float32.npy";
        let p = TensorFileName::parse(n).unwrap();
        assert_eq!(p.id.op_type, "Conv2D");
        assert_eq!(
            p.id.op_name,
            "Default_network-WithLossCell__backbone-TinyNet_conv1-Conv2d_Conv2D-op0"
        );
        assert_eq!(
            (
                p.id.task_id,
                p.id.stream_id,
                p.id.timestamp,
                p.id.io,
                p.id.slot
            ),
            (0, 0, 1795332152777873, Io::Input, 1)
        );
        assert_eq!(
            (p.format, p.dtype, p.spelling),
            ("DefaultFormat", DType::Float32, DTypeSpelling::Cpu)
        );
        assert_eq!(p.render(), n);
        let g = TensorFileName::parse("Add.Default_Add-op0.3.7.12.output.0.NC1HWC0.bfloat16.npy")
            .unwrap();
        assert_eq!((g.id.task_id, g.id.stream_id, g.id.timestamp), (3, 7, 12));
        assert_eq!(
            (g.id.io, g.format, g.dtype, g.spelling),
            (
                Io::Output,
                "NC1HWC0",
                DType::BFloat16,
                DTypeSpelling::Device
            )
        );
    }

    #[test]
    fn rejects_other_names() {
        for bad in [
            "x.npy",
            "a.b.0.0.1.input.0.DefaultFormat.Float32.bin",
            "a.b.0.0.1.inout.0.DefaultFormat.Float32.npy",
            "a.b.0.0.x1.input.0.DefaultFormat.Float32.npy",
            "a.b.0.0.1.input.0.DefaultFormat.Float33.npy",
            "a.b.0.0.1.input.-1.DefaultFormat.Float32.npy",
            "a.b.0.0.1.input.+1.DefaultFormat.Float32.npy",
            "a.b.0.0.1.input.4294967296.DefaultFormat.Float32.npy",
            ".b.0.0.1.input.0.DefaultFormat.Float32.npy",
            "a..0.0.1.input.0.DefaultFormat.Float32.npy",
            "a.b.0.0.1.input.0..Float32.npy",
            "a.b.c.0.0.1.input.0.DefaultFormat.Float32.npy",
            "a.b.0.0.1.input.0.DefaultFormat.npy",
        ] {
            assert!(TensorFileName::parse(bad).is_none(), "{bad}");
        }
    }

    mod roundtrip {
        use super::super::*;
        use proptest::prelude::*;

        fn text() -> impl Strategy<Value = String> {
            // Any text, hostile characters included; sanitised before it is rendered.
            "[a-zA-Z0-9_./\\\\ ,:|\\-\n\u{0}\u{e9}]{1,40}".prop_map(|s| sanitize(&s))
        }

        proptest! {
            #[test]
            fn parse_inverts_render(
                op_type in text(), op_name in text(), format in text(),
                task_id: u32, stream_id: u32, timestamp: u64, input: bool, slot: u32,
                dtype in proptest::sample::select(DType::ALL.to_vec()), cpu: bool,
            ) {
                let n = TensorFileName {
                    id: TensorId {
                        op_type: &op_type, op_name: &op_name, task_id, stream_id, timestamp,
                        io: if input { Io::Input } else { Io::Output }, slot,
                    },
                    format: &format, dtype,
                    spelling: if cpu { DTypeSpelling::Cpu } else { DTypeSpelling::Device },
                };
                let s = n.render();
                let back = TensorFileName::parse(&s);
                prop_assert_eq!(back.as_ref(), Some(&n));
                prop_assert_eq!(back.map(|b| b.render()), Some(s));
            }

            #[test]
            fn render_inverts_parse(s in "[A-Za-z_]{1,8}\\.[A-Za-z0-9_-]{1,20}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[1-9][0-9]{0,15}\\.(input|output)\\.[1-9]?[0-9]\\.[A-Za-z]{1,8}\\.(Float32|float16|BFloat16|int4|UInt1|Bool)\\.npy") {
                // Leading zeros are valid in a parsed name but rendered without: skip those.
                let p = TensorFileName::parse(&s);
                prop_assume!(p.is_some());
                let p = p.unwrap();
                prop_assume!(!s.split('.').skip(2).take(3).any(|f| f.len() > 1 && f.starts_with('0')));
                prop_assert_eq!(p.render(), s);
            }
        }
    }
}
