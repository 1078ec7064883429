//! [`StatRecord`]: the statistics of one tensor, the payload of a stat frame.
//!
//! A record is self-contained: it names its graph, iteration, op type and op name, so a host
//! can turn it into a `statistic.csv` row even when the frames around it were lost. It can also
//! stand alone, encoded bare ([`StatRecord::encode`]) or COBS-framed without a session header
//! ([`StatRecord::encode_cobs`]); device agents send it inside a frame (see [`super::frame`]).
//!
//! ```
//! use dump_core::{DType, Summary};
//! use dump_core::wire::{Io, StatRecord, MAX_ENCODED_LEN};
//!
//! let mut s = Summary::EMPTY;
//! for v in [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] {
//!     s.push(v);
//! }
//! let mut rec = StatRecord::new("Default--Add-op0", Io::Output, 0, DType::Float32, &[2, 3], s)?;
//! rec.md5 = Some(dump_core::hash::md5(b"tensor bytes"));
//!
//! let mut buf = [0u8; MAX_ENCODED_LEN];
//! let bytes = rec.encode(&mut buf)?;
//! assert!(bytes.len() < 140);
//! assert_eq!(StatRecord::decode(bytes)?, rec);
//! # Ok::<(), dump_core::Error>(())
//! ```

use crate::{DType, Error, Summary};
use serde::{Deserialize, Serialize};

/// Capacity of [`StatRecord::op`] (and every other op name on the wire) in bytes.
pub const OP_NAME_CAP: usize = 128;

/// Capacity of [`StatRecord::op_type`] in bytes.
pub const OP_TYPE_CAP: usize = 32;

/// Largest tensor rank a [`StatRecord`] carries.
pub const MAX_RANK: usize = 8;

/// Capacity of [`StatRecord::sample`] in bytes.
pub const SAMPLE_CAP: usize = 64;

/// Upper bound of a bare encoded [`StatRecord`], field by field (postcard: `u32`/`u64` are
/// LEB128 varints of at most 5/10 bytes, a string or byte vector is a varint length then its
/// bytes, `Option` a 0/1 byte, an enum a varint variant index): graph 5, iteration 5, op type
/// 1 + 32, op 2 + 128, io 1, slot 5, dtype 1, shape 1 + 8 × 5, summary 7 × 10 + 6 × 8 (`f64`
/// little-endian), md5 1 + 16, sample 1 + 1 + 64.
pub const MAX_ENCODED_LEN: usize = 422;

/// Upper bound of a COBS-framed [`StatRecord`]: one overhead byte per 254 bytes plus the
/// leading code byte and the trailing `0x00` sentinel.
pub const MAX_COBS_LEN: usize = MAX_ENCODED_LEN + MAX_ENCODED_LEN / 254 + 2;

/// Whether a record describes an operator input or output (`IO` column of `statistic.csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Io {
    /// An operator input (`input`).
    Input,
    /// An operator output (`output`).
    Output,
}

impl Io {
    /// The `statistic.csv` spelling: `input` or `output`.
    pub const fn name(self) -> &'static str {
        match self {
            Io::Input => "input",
            Io::Output => "output",
        }
    }
}

/// Statistics of one tensor, as a device agent sends them to the host: everything a
/// `statistic.csv` row needs except the task/stream ids and the timestamp (the host's).
///
/// The field order below is the wire order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StatRecord {
    /// Graph id (the `graph_id` of the begin-graph frame).
    pub graph_id: u32,
    /// Iteration (step) the tensor belongs to.
    pub iteration: u32,
    /// Operator type (`Conv2D`, `MatMul`), at most [`OP_TYPE_CAP`] bytes (`Op Type` column).
    pub op_type: heapless::String<OP_TYPE_CAP>,
    /// Operator name (as it appears in the dump file name), at most [`OP_NAME_CAP`] bytes.
    pub op: heapless::String<OP_NAME_CAP>,
    /// Input or output.
    pub io: Io,
    /// Input/output index.
    pub slot: u32,
    /// Element type of the tensor.
    pub dtype: DType,
    /// Logical shape, at most [`MAX_RANK`] dimensions (empty for a 0-d tensor).
    pub shape: heapless::Vec<u32, MAX_RANK>,
    /// The statistics.
    pub summary: Summary,
    /// MD5 of the raw tensor bytes, when the agent computed it.
    pub md5: Option<[u8; 16]>,
    /// The first bytes of the tensor's storage (little-endian, whole elements, at most
    /// [`SAMPLE_CAP`] bytes), when the plan asks for a sample.
    pub sample: Option<heapless::Vec<u8, SAMPLE_CAP>>,
}

impl StatRecord {
    /// A record of graph 0, iteration 0, with an empty op type, no MD5 and no sample; errors
    /// if `op` is longer than [`OP_NAME_CAP`] bytes or `shape` has more than [`MAX_RANK`]
    /// dimensions.
    pub fn new(
        op: &str,
        io: Io,
        slot: u32,
        dtype: DType,
        shape: &[u32],
        summary: Summary,
    ) -> Result<StatRecord, Error> {
        let op = heapless::String::try_from(op).map_err(|_| Error::Wire {
            reason: "op name is longer than OP_NAME_CAP (128) bytes",
        })?;
        let shape = heapless::Vec::from_slice(shape).map_err(|_| Error::Wire {
            reason: "shape has more than MAX_RANK (8) dimensions",
        })?;
        Ok(StatRecord {
            graph_id: 0,
            iteration: 0,
            op_type: heapless::String::new(),
            op,
            io,
            slot,
            dtype,
            shape,
            summary,
            md5: None,
            sample: None,
        })
    }

    /// Sets [`op_type`](StatRecord::op_type); errors if it is longer than [`OP_TYPE_CAP`]
    /// bytes.
    pub fn with_op_type(mut self, op_type: &str) -> Result<StatRecord, Error> {
        self.op_type = heapless::String::try_from(op_type).map_err(|_| Error::Wire {
            reason: "op type is longer than OP_TYPE_CAP (32) bytes",
        })?;
        Ok(self)
    }

    /// Number of elements of [`shape`](StatRecord::shape) (1 for a 0-d tensor); `None` on
    /// overflow.
    pub fn elements(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::from(d)))
    }

    /// Encodes the record with postcard into `buf` and returns the used prefix.
    /// [`MAX_ENCODED_LEN`] bytes always suffice.
    pub fn encode<'b>(&self, buf: &'b mut [u8]) -> Result<&'b [u8], Error> {
        postcard::to_slice(self, buf)
            .map(|b| &*b)
            .map_err(wire_error)
    }

    /// Encodes the record with postcard and COBS framing (ending in one `0x00`), for byte
    /// streams. [`MAX_COBS_LEN`] bytes always suffice.
    pub fn encode_cobs<'b>(&self, buf: &'b mut [u8]) -> Result<&'b [u8], Error> {
        postcard::to_slice_cobs(self, buf)
            .map(|b| &*b)
            .map_err(wire_error)
    }

    /// Decodes one bare record; `bytes` must hold exactly one record, nothing after it.
    pub fn decode(bytes: &[u8]) -> Result<StatRecord, Error> {
        let (rec, rest) = postcard::take_from_bytes(bytes).map_err(wire_error)?;
        if !rest.is_empty() {
            return Err(Error::Wire {
                reason: "trailing bytes after the record",
            });
        }
        Ok(rec)
    }

    /// Decodes one COBS frame (with or without its trailing `0x00`), in place: `frame` is
    /// overwritten by the decoded bytes.
    pub fn decode_cobs(frame: &mut [u8]) -> Result<StatRecord, Error> {
        postcard::from_bytes_cobs(frame).map_err(wire_error)
    }
}

/// Why a record does not decode: it is cut short.
pub(crate) const TRUNCATED: &str = "record is truncated";
/// Why a record does not decode: a varint is too long or overflows its type.
pub(crate) const BAD_VARINT: &str = "record has an invalid varint";
/// Why a record does not decode: a string is not UTF-8.
pub(crate) const BAD_UTF8: &str = "op name is not valid UTF-8";
/// Why a record does not decode: an `Option` tag other than 0 or 1.
pub(crate) const BAD_OPTION: &str = "record has an invalid Option tag";
/// Why a record does not decode: anything else (a string or sequence over its capacity, an
/// unknown enum variant).
pub(crate) const NOT_A_RECORD: &str = "record bytes are not a valid StatRecord";
/// Why a frame's payload does not decode: bytes after the value.
pub(crate) const TRAILING_PAYLOAD: &str = "trailing bytes after the payload";

/// Words for a postcard error.
pub(crate) fn wire_error(e: postcard::Error) -> Error {
    use postcard::Error as P;
    let reason = match e {
        P::SerializeBufferFull => {
            "output buffer too small for the encoded record (MAX_ENCODED_LEN bytes suffice)"
        }
        P::DeserializeUnexpectedEnd => TRUNCATED,
        P::DeserializeBadVarint => BAD_VARINT,
        P::DeserializeBadBool => "record has an invalid bool",
        P::DeserializeBadChar => "record has an invalid char",
        P::DeserializeBadUtf8 => BAD_UTF8,
        P::DeserializeBadOption => BAD_OPTION,
        P::DeserializeBadEnum => "record has an unknown enum variant (io or dtype)",
        P::DeserializeBadEncoding => "record bytes are not a valid COBS frame or encoding",
        _ => NOT_A_RECORD,
    };
    Error::Wire { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(vals: &[f64]) -> Summary {
        let mut s = Summary::EMPTY;
        for &v in vals {
            s.push(v);
        }
        s
    }

    /// The largest record: every varint at its widest, full name, full rank, md5.
    fn max_record() -> StatRecord {
        let s = Summary {
            count: u64::MAX,
            nan: u64::MAX,
            pos_inf: u64::MAX,
            neg_inf: u64::MAX,
            zero: u64::MAX,
            pos: u64::MAX,
            neg: u64::MAX,
            ..summary_of(&[f64::NAN, -1.5])
        };
        let op = "x".repeat(OP_NAME_CAP);
        let mut r = StatRecord::new(
            &op,
            Io::Input,
            u32::MAX,
            DType::Complex128,
            &[u32::MAX; MAX_RANK],
            s,
        )
        .unwrap()
        .with_op_type(&"T".repeat(OP_TYPE_CAP))
        .unwrap();
        r.graph_id = u32::MAX;
        r.iteration = u32::MAX;
        r.md5 = Some([0xff; 16]);
        r.sample = Some(heapless::Vec::from_slice(&[0xee; SAMPLE_CAP]).unwrap());
        r
    }

    #[test]
    fn round_trip_bare_and_cobs() {
        let mut r = StatRecord::new(
            "Default--Conv2D-op12",
            Io::Output,
            0,
            DType::BFloat16,
            &[32, 2],
            summary_of(&[1.0; 64]),
        )
        .unwrap();
        let mut buf = [0u8; MAX_COBS_LEN];
        let n = r.encode(&mut buf).unwrap().len();
        assert_eq!(StatRecord::decode(&buf[..n]).unwrap(), r);
        r.md5 = Some(crate::hash::md5(b"x"));
        let bytes = r.encode_cobs(&mut buf).unwrap();
        assert_eq!(bytes.last(), Some(&0));
        assert!(
            !bytes[..bytes.len() - 1].contains(&0),
            "COBS frames hold no zero"
        );
        let n = bytes.len();
        let back = StatRecord::decode_cobs(&mut buf[..n]).unwrap();
        assert_eq!(back, r);
        assert_eq!(crate::fmt::g(back.summary.l2norm()).as_str(), "8");
    }

    #[test]
    fn nan_summary_round_trips_bitwise() {
        let r = StatRecord::new(
            "op",
            Io::Input,
            3,
            DType::Float32,
            &[],
            summary_of(&[-f64::NAN, 2.0]),
        )
        .unwrap();
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let back = StatRecord::decode(r.encode(&mut buf).unwrap()).unwrap();
        assert_eq!(
            back.summary.first_nan.to_bits(),
            r.summary.first_nan.to_bits()
        );
        assert_eq!(crate::fmt::g(back.summary.max_value()).as_str(), "-nan");
    }

    #[test]
    fn max_record_fits_bounds_exactly() {
        // The summary holds NaNs (NaN != NaN), so compare re-encoded bytes.
        let r = max_record();
        let mut buf = [0u8; MAX_COBS_LEN];
        let mut again = [0u8; MAX_COBS_LEN];
        let n = r.encode(&mut buf).unwrap().len();
        assert_eq!(n, MAX_ENCODED_LEN);
        let back = StatRecord::decode(&buf[..n]).unwrap();
        assert_eq!(back.encode(&mut again).unwrap(), &buf[..n]);
        assert_eq!(back.op, r.op);
        assert_eq!(back.shape, r.shape);
        let n = r.encode_cobs(&mut buf).unwrap().len();
        assert!(n <= MAX_COBS_LEN, "{n}");
        let back = StatRecord::decode_cobs(&mut buf[..n]).unwrap();
        let m = back.encode(&mut again).unwrap().len();
        assert_eq!(m, MAX_ENCODED_LEN);
        assert_eq!(back.md5, Some([0xff; 16]));
    }

    #[test]
    fn errors_are_clear() {
        let r = max_record();
        let mut small = [0u8; 16];
        let e = r.encode(&mut small).unwrap_err();
        assert!(matches!(e, Error::Wire { reason } if reason.contains("too small")));
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let n = r.encode(&mut buf).unwrap().len();
        assert_eq!(
            StatRecord::decode(&buf[..n - 1]),
            Err(Error::Wire {
                reason: "record is truncated"
            })
        );
        let mut long = [0u8; MAX_ENCODED_LEN + 1];
        long[..n].copy_from_slice(&buf[..n]);
        assert_eq!(
            StatRecord::decode(&long),
            Err(Error::Wire {
                reason: "trailing bytes after the record"
            })
        );
        let name = "y".repeat(OP_NAME_CAP + 1);
        assert!(StatRecord::new(&name, Io::Input, 0, DType::Int8, &[], Summary::EMPTY).is_err());
        assert!(StatRecord::new("a", Io::Input, 0, DType::Int8, &[1; 9], Summary::EMPTY).is_err());
        let ok = StatRecord::new("a", Io::Input, 0, DType::Int8, &[2, 3], Summary::EMPTY).unwrap();
        assert_eq!(ok.elements(), Some(6));
        assert!(ok.with_op_type(&"t".repeat(OP_TYPE_CAP + 1)).is_err());
        assert_eq!(Io::Input.name(), "input");
        assert_eq!(Io::Output.name(), "output");
        let msg = format!("{e}");
        assert!(
            msg.starts_with("wire record: output buffer too small"),
            "{msg}"
        );
    }
}
