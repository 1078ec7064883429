//! [`WriteOptions`]: how dtypes without a stock-numpy descr are written.

/// How `bfloat16` tensors are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Bf16Mode {
    /// Widen every value exactly to float32 and write descr `<f4` (default). This is what
    /// MindSpore documents and does on GPU/Ascend, and what stock `numpy.load` can read.
    #[default]
    Widen,
    /// Write the raw 2-byte values with descr `<E2`, byte-identical to MindSpore 2.10 on CPU.
    /// Stock numpy cannot load such files (`<E2` is not a numpy descr).
    Raw,
}

/// Options of the `.npy` writer.
///
/// `int4` is always written widened to `|i1` and `uint1` to `|u1` (numpy has neither), each
/// with the tensor's logical shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WriteOptions {
    /// How `bfloat16` is written.
    pub bf16: Bf16Mode,
}

impl WriteOptions {
    /// The defaults: bf16 widened to `<f4`.
    pub const fn new() -> Self {
        WriteOptions {
            bf16: Bf16Mode::Widen,
        }
    }

    /// Byte-compatible with MindSpore 2.10 on CPU: bf16 raw as `<E2`.
    pub const MINDSPORE_CPU: WriteOptions = WriteOptions {
        bf16: Bf16Mode::Raw,
    };

    /// These options with `bf16` set to `mode`.
    pub const fn with_bf16(mut self, mode: Bf16Mode) -> Self {
        self.bf16 = mode;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_widen() {
        assert_eq!(WriteOptions::default().bf16, Bf16Mode::Widen);
        assert_eq!(WriteOptions::new(), WriteOptions::default());
        assert_eq!(
            WriteOptions::new().with_bf16(Bf16Mode::Raw),
            WriteOptions::MINDSPORE_CPU
        );
    }
}
