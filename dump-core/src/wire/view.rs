//! [`StatView`]: a stat record decoded where it lies, for the host's hot path.
//!
//! [`StatRecord::decode`] goes through serde and postcard and copies the op type, op name and
//! sample into the record's fixed buffers. A host that turns a million records a second into
//! rows needs neither: [`StatView::decode`] reads the same postcard bytes by hand and borrows
//! the strings and the sample from the payload. It accepts exactly the payloads postcard
//! accepts for a [`StatRecord`] followed by nothing, gives the same value, and refuses the
//! rest with the same error (checked against postcard on random and mutated payloads in the
//! tests below and in `tests.rs`).
//!
//! The rules it follows are postcard's (version 1): a `u32`/`u64` is a LEB128 varint of at
//! most 5/10 bytes whose last byte may not carry bits above the type (a longer or overflowing
//! varint is invalid; a non-minimal one is accepted); a length is a `usize` varint; a string
//! is a length and that many UTF-8 bytes; an enum is a `u32` varint variant index; an
//! `Option` is a tag byte `0` or `1`; an `f64` is 8 bytes little-endian; a `u8` is one byte.
//! Fields are read in declaration order and the first failure is the error, as postcard
//! reports it (a string or sequence longer than its capacity fails only after its bytes or
//! its first extra element were read, as serde's visitors do).

use super::record::{self, Io, MAX_RANK, OP_NAME_CAP, OP_TYPE_CAP, SAMPLE_CAP, StatRecord};
use crate::{DType, Error, Summary};

/// A stat record whose strings and sample borrow the payload it was decoded from; see the
/// module documentation. [`to_record`](StatView::to_record) makes the owned [`StatRecord`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StatView<'a> {
    /// Graph id.
    pub graph_id: u32,
    /// Iteration.
    pub iteration: u32,
    op_type: &'a str,
    op: &'a str,
    /// Input or output.
    pub io: Io,
    /// Input/output index.
    pub slot: u32,
    /// Element type.
    pub dtype: DType,
    shape: [u32; MAX_RANK],
    rank: u8,
    /// The statistics.
    pub summary: Summary,
    /// MD5 of the tensor's bytes, when the agent sent one.
    pub md5: Option<[u8; 16]>,
    sample: Option<&'a [u8]>,
}

/// Why postcard refuses bytes (the variants [`record::wire_error`] words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    End,
    Varint,
    Utf8,
    Option,
    /// A serde visitor's refusal: a string or sequence over capacity, an unknown variant.
    Custom,
}

impl Fail {
    fn error(self) -> Error {
        let reason = match self {
            Fail::End => record::TRUNCATED,
            Fail::Varint => record::BAD_VARINT,
            Fail::Utf8 => record::BAD_UTF8,
            Fail::Option => record::BAD_OPTION,
            Fail::Custom => record::NOT_A_RECORD,
        };
        Error::Wire { reason }
    }
}

/// The unread rest of a payload.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    #[inline]
    fn byte(&mut self) -> Result<u8, Fail> {
        let (&b, rest) = self.rest.split_first().ok_or(Fail::End)?;
        self.rest = rest;
        Ok(b)
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if n > self.rest.len() {
            return Err(Fail::End);
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// A LEB128 varint of at most `max` bytes whose last byte is at most `last`.
    #[inline]
    fn varint(&mut self, max: u32, last: u8) -> Result<u64, Fail> {
        let b = self.byte()?;
        if b < 0x80 {
            return Ok(u64::from(b));
        }
        let mut v = u64::from(b & 0x7f);
        for i in 1..max {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if i == max - 1 && b > last {
                    return Err(Fail::Varint);
                }
                return Ok(v);
            }
        }
        Err(Fail::Varint)
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, Fail> {
        // 5 bytes; the fifth holds bits 28..32.
        self.varint(5, 0x0f).map(|v| v as u32)
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, Fail> {
        // 10 bytes; the tenth holds bit 63.
        self.varint(10, 0x01)
    }

    /// A length: postcard's `usize` varint, as wide as this target's `usize`.
    #[inline]
    fn len(&mut self) -> Result<usize, Fail> {
        #[cfg(target_pointer_width = "64")]
        let n = self.u64()?;
        #[cfg(target_pointer_width = "32")]
        let n = self.u32()?;
        #[cfg(target_pointer_width = "16")]
        let n = self.varint(3, 0x03)?;
        Ok(n as usize)
    }

    #[inline]
    fn f64(&mut self) -> Result<f64, Fail> {
        let b = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(f64::from_le_bytes(w))
    }

    /// A string of at most `cap` bytes (longer: refused after its bytes, as heapless does).
    #[inline]
    fn str(&mut self, cap: usize) -> Result<&'a str, Fail> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        let s = core::str::from_utf8(bytes).map_err(|_| Fail::Utf8)?;
        if s.len() > cap {
            return Err(Fail::Custom);
        }
        Ok(s)
    }

    #[inline]
    fn option(&mut self) -> Result<bool, Fail> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Fail::Option),
        }
    }

    /// A variant index below `n`.
    #[inline]
    fn variant(&mut self, n: usize) -> Result<usize, Fail> {
        let v = self.u32()? as usize;
        if v < n { Ok(v) } else { Err(Fail::Custom) }
    }
}

impl<'a> StatView<'a> {
    /// Decodes the payload of a stat frame: exactly one postcard [`StatRecord`], nothing after
    /// it. Accepts and refuses what `postcard` does, with the errors
    /// [`crate::wire::Frame::decode`] gives.
    pub fn decode(payload: &'a [u8]) -> Result<StatView<'a>, Error> {
        let mut c = Cursor { rest: payload };
        let v = Self::read(&mut c).map_err(Fail::error)?;
        if !c.rest.is_empty() {
            return Err(Error::Wire {
                reason: record::TRAILING_PAYLOAD,
            });
        }
        Ok(v)
    }

    fn read(c: &mut Cursor<'a>) -> Result<StatView<'a>, Fail> {
        let graph_id = c.u32()?;
        let iteration = c.u32()?;
        let op_type = c.str(OP_TYPE_CAP)?;
        let op = c.str(OP_NAME_CAP)?;
        let io = match c.variant(2)? {
            0 => Io::Input,
            _ => Io::Output,
        };
        let slot = c.u32()?;
        let dtype = DType::ALL[c.variant(DType::ALL.len())?];
        let mut shape = [0u32; MAX_RANK];
        let n = c.len()?;
        for i in 0..n {
            let d = c.u32()?;
            // heapless refuses the first element past its capacity, once it is read.
            *shape.get_mut(i).ok_or(Fail::Custom)? = d;
        }
        let summary = Summary {
            count: c.u64()?,
            max: c.f64()?,
            min: c.f64()?,
            sum: c.f64()?,
            sum_sq: c.f64()?,
            nan: c.u64()?,
            pos_inf: c.u64()?,
            neg_inf: c.u64()?,
            zero: c.u64()?,
            pos: c.u64()?,
            neg: c.u64()?,
            first_nan: c.f64()?,
            last_nan: c.f64()?,
        };
        let md5 = match c.option()? {
            false => None,
            true => {
                let mut d = [0u8; 16];
                d.copy_from_slice(c.take(16)?);
                Some(d)
            }
        };
        let sample = match c.option()? {
            false => None,
            true => {
                let n = c.len()?;
                if n > SAMPLE_CAP {
                    // Element by element: the capacity's bytes, then the refused extra one.
                    c.take(SAMPLE_CAP + 1)?;
                    return Err(Fail::Custom);
                }
                Some(c.take(n)?)
            }
        };
        Ok(StatView {
            graph_id,
            iteration,
            op_type,
            op,
            io,
            slot,
            dtype,
            shape,
            rank: n as u8,
            summary,
            md5,
            sample,
        })
    }

    /// Operator type (at most [`OP_TYPE_CAP`] bytes).
    pub fn op_type(&self) -> &'a str {
        self.op_type
    }

    /// Operator name (at most [`OP_NAME_CAP`] bytes).
    pub fn op(&self) -> &'a str {
        self.op
    }

    /// Logical shape (at most [`MAX_RANK`] dimensions).
    pub fn shape(&self) -> &[u32] {
        self.shape.get(..usize::from(self.rank)).unwrap_or(&[])
    }

    /// The sample bytes, when the agent sent some (at most [`SAMPLE_CAP`]).
    pub fn sample(&self) -> Option<&'a [u8]> {
        self.sample
    }

    /// The owned record (what [`StatRecord::decode`] gives for the same payload).
    pub fn to_record(&self) -> StatRecord {
        // Every length was checked against its capacity when the view was decoded (the only
        // way to make one), so the conversions below keep every byte.
        let mut r = StatRecord {
            graph_id: self.graph_id,
            iteration: self.iteration,
            op_type: heapless::String::new(),
            op: heapless::String::new(),
            io: self.io,
            slot: self.slot,
            dtype: self.dtype,
            shape: heapless::Vec::from_slice(self.shape()).unwrap_or_default(),
            summary: self.summary,
            md5: self.md5,
            sample: None,
        };
        let _ = r.op_type.push_str(self.op_type);
        let _ = r.op.push_str(self.op);
        r.sample = self
            .sample
            .map(|s| heapless::Vec::from_slice(s).unwrap_or_default());
        r
    }
}

impl<'a> From<&'a StatRecord> for StatView<'a> {
    /// A view of an owned record (its strings and sample borrowed).
    fn from(r: &'a StatRecord) -> StatView<'a> {
        let mut shape = [0u32; MAX_RANK];
        for (d, &s) in shape.iter_mut().zip(&r.shape) {
            *d = s;
        }
        StatView {
            graph_id: r.graph_id,
            iteration: r.iteration,
            op_type: &r.op_type,
            op: &r.op,
            io: r.io,
            slot: r.slot,
            dtype: r.dtype,
            shape,
            rank: r.shape.len() as u8,
            summary: r.summary,
            md5: r.md5,
            sample: r.sample.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MAX_ENCODED_LEN;
    use std::{format, string::String, vec::Vec};

    /// xorshift64*.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// A value with a random number of significant bits (short and long varints).
        fn wide(&mut self) -> u64 {
            self.next() >> self.below(64)
        }
    }

    fn random_record(rng: &mut Rng) -> StatRecord {
        let name: String = (0..rng.below(OP_NAME_CAP as u64 + 1))
            .map(|i| ['a', '/', '-', 'é', '0', '_'][((i + rng.below(6)) % 6) as usize])
            .collect::<String>()
            .chars()
            .scan(0, |len, c| {
                *len += c.len_utf8();
                (*len <= OP_NAME_CAP).then_some(c)
            })
            .collect();
        let dims: Vec<u32> = (0..rng.below(MAX_RANK as u64 + 1))
            .map(|_| rng.wide() as u32)
            .collect();
        let f = |rng: &mut Rng| match rng.below(5) {
            0 => f64::from_bits(rng.next()),
            1 => -0.0,
            2 => f64::INFINITY,
            _ => (rng.below(1 << 20) as f64 - 5e5) / 7.0,
        };
        let summary = Summary {
            count: rng.wide(),
            max: f(rng),
            min: f(rng),
            sum: f(rng),
            sum_sq: f(rng),
            nan: rng.wide(),
            pos_inf: rng.wide(),
            neg_inf: rng.wide(),
            zero: rng.wide(),
            pos: rng.wide(),
            neg: rng.wide(),
            first_nan: f(rng),
            last_nan: f(rng),
        };
        let io = if rng.below(2) == 0 {
            Io::Input
        } else {
            Io::Output
        };
        let dtype = DType::ALL[rng.below(DType::ALL.len() as u64) as usize];
        let mut r = StatRecord::new(&name, io, rng.wide() as u32, dtype, &dims, summary)
            .unwrap()
            .with_op_type(&"MatMul"[..rng.below(7) as usize])
            .unwrap();
        r.graph_id = rng.wide() as u32;
        r.iteration = rng.wide() as u32;
        if rng.below(2) == 0 {
            r.md5 = Some(crate::hash::md5(&rng.next().to_le_bytes()));
        }
        if rng.below(3) == 0 {
            let n = rng.below(SAMPLE_CAP as u64 + 1) as usize;
            r.sample = Some((0..n).map(|_| rng.next() as u8).collect());
        }
        r
    }

    /// Both decoders on `bytes`: the same record (compared as Debug text: NaNs) or the same
    /// error.
    fn same(bytes: &[u8]) -> bool {
        let want = super::super::session::exact::<StatRecord>(bytes);
        let got = StatView::decode(bytes).map(|v| v.to_record());
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{bytes:02x?}");
        want.is_ok()
    }

    #[test]
    fn accepts_and_refuses_exactly_what_postcard_does() {
        let mut rng = Rng(0x57a7_0f1e_3d00_2026);
        let mut buf = [0u8; MAX_ENCODED_LEN + 80];
        let (mut ok, mut refused) = (0u32, 0u32);
        for _ in 0..20_000 {
            let r = random_record(&mut rng);
            let n = r.encode(&mut buf).unwrap().len();
            let good = buf[..n].to_vec();
            assert!(same(&good));
            let v = StatView::decode(&good).unwrap();
            assert_eq!((v.op(), v.op_type()), (r.op.as_str(), r.op_type.as_str()));
            assert_eq!(v.shape(), &r.shape[..]);
            assert_eq!(v.sample(), r.sample.as_deref());
            assert_eq!(format!("{:?}", StatView::from(&r)), format!("{v:?}"));
            // Mutations: flipped bits, bytes set to varint and tag edge values, cuts,
            // insertions, deletions, trailing bytes.
            for _ in 0..8 {
                let mut m = good.clone();
                match rng.below(7) {
                    0 => {
                        let bit = rng.below(m.len() as u64 * 8) as usize;
                        m[bit / 8] ^= 1 << (bit % 8);
                    }
                    1 => {
                        let i = rng.below(m.len() as u64) as usize;
                        m[i] = [0, 1, 2, 0x0f, 0x10, 0x7f, 0x80, 0xff, 0x41, 9]
                            [rng.below(10) as usize];
                    }
                    2 => m.truncate(rng.below(m.len() as u64) as usize),
                    3 => {
                        let i = rng.below(m.len() as u64 + 1) as usize;
                        for _ in 0..1 + rng.below(4) {
                            m.insert(i, [0x80, 0xff, 0, 1, 0x81][rng.below(5) as usize]);
                        }
                    }
                    4 => {
                        let i = rng.below(m.len() as u64) as usize;
                        m.remove(i);
                    }
                    5 => m.push(rng.next() as u8),
                    _ => {
                        // A length byte made larger than its capacity (strings, shape, sample).
                        let i = rng.below(m.len() as u64) as usize;
                        m[i] = [9, 33, 65, 129, 0x81][rng.below(5) as usize];
                        m.extend((0..rng.below(200)).map(|_| 0x41));
                    }
                }
                if same(&m) {
                    ok += 1;
                } else {
                    refused += 1;
                }
            }
            let noise: Vec<u8> = (0..rng.below(120)).map(|_| rng.next() as u8).collect();
            same(&noise);
        }
        // Both outcomes were exercised many times.
        assert!(
            ok > 10_000 && refused > 50_000,
            "{ok} accepted, {refused} refused"
        );
    }

    #[test]
    fn edge_varints_lengths_and_variants() {
        // graph 0, iteration 0, "", "", io, slot 0, dtype 0, shape [], summary, md5 None, sample None
        let tail = |io: u8, dtype: &[u8]| {
            let mut v = std::vec![0u8, 0, 0, 0, io, 0];
            v.extend_from_slice(dtype);
            v.push(0); // shape
            v.push(1); // count
            v.extend_from_slice(&[0u8; 32]);
            v.extend_from_slice(&[0u8; 6]);
            v.extend_from_slice(&[0u8; 16]);
            v.extend_from_slice(&[0, 0]);
            v
        };
        assert!(same(&tail(0, &[13])));
        assert!(!same(&tail(2, &[13])), "io 2");
        assert!(
            !same(&tail(0, &[DType::ALL.len() as u8])),
            "dtype past the last"
        );
        assert!(same(&tail(1, &[0x81, 0x00])), "non-minimal varint");
        assert!(
            !same(&tail(1, &[0xff, 0xff, 0xff, 0xff, 0x1f])),
            "u32 overflow"
        );
        assert!(
            same(&tail(1, &[0x80, 0x80, 0x80, 0x80, 0x00])),
            "five-byte zero"
        );
        let mut big_count = tail(0, &[1]);
        big_count.splice(
            8..9,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        );
        assert!(same(&big_count), "u64::MAX");
        big_count[17] = 0x02;
        assert!(!same(&big_count), "u64 overflow");
        // A shape of 9 dimensions, and of a huge length with too few bytes.
        let mut nine = tail(0, &[1]);
        nine.splice(7..8, [9, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(!same(&nine));
        nine.truncate(14);
        assert!(!same(&nine));
        // A 65-byte sample, and one cut short.
        let mut sample = tail(0, &[1]);
        let n = sample.len();
        sample[n - 1] = 1;
        sample.push(65);
        sample.extend_from_slice(&[7; 65]);
        assert!(!same(&sample));
        sample.truncate(sample.len() - 2);
        assert!(!same(&sample));
        assert!(!same(&[]));
    }
}
