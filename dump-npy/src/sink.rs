//! [`NpySink`]: where the writer puts bytes, with implementations for slices, `Vec<u8>`
//! (feature `alloc`) and any [`std::io::Write`] (feature `std`, through [`IoSink`]).

use crate::Error;

/// A byte sink the writer streams a `.npy` file into.
///
/// The sink's error type must absorb [`Error`] so that validation errors and the sink's own
/// failures come out of one `Result`.
pub trait NpySink {
    /// The sink's error type.
    type Error: From<Error>;

    /// Writes all of `bytes` or fails.
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
}

impl<S: NpySink + ?Sized> NpySink for &mut S {
    type Error = S::Error;

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        (**self).write_all(bytes)
    }
}

/// A sink over a caller's buffer; fails with `BufferTooSmall` instead of overrunning it.
#[derive(Debug)]
pub struct SliceSink<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> SliceSink<'a> {
    /// A sink that fills `buf` from its start.
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceSink { buf, pos: 0 }
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// `true` when nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }
}

impl NpySink for SliceSink<'_> {
    type Error = Error;

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let available = self.buf.len() - self.pos;
        if bytes.len() > available {
            return Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: self.pos.saturating_add(bytes.len()),
                available: self.buf.len(),
            }));
        }
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
        Ok(())
    }
}

#[cfg(feature = "alloc")]
impl NpySink for alloc::vec::Vec<u8> {
    type Error = Error;

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// Adapts any [`std::io::Write`] into an [`NpySink`] (errors are `std::io::Error`; opdump's
/// own errors become `InvalidInput`/`InvalidData` I/O errors that wrap an [`Error`]).
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct IoSink<W>(pub W);

#[cfg(feature = "std")]
impl<W: std::io::Write> NpySink for IoSink<W> {
    type Error = std::io::Error;

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_all(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_sink_refuses_overrun() {
        let mut buf = [0u8; 4];
        let mut s = SliceSink::new(&mut buf);
        assert!(s.is_empty());
        assert_eq!(s.write_all(b"abc"), Ok(()));
        assert_eq!(
            s.write_all(b"de"),
            Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: 5,
                available: 4
            }))
        );
        assert_eq!(s.written(), b"abc");
        assert_eq!(s.len(), 3);
        assert_eq!(s.write_all(b"d"), Ok(()));
        assert_eq!(buf, *b"abcd");
    }

    #[test]
    fn vec_and_io_sinks() {
        let mut v = Vec::new();
        v.write_all(b"xy").unwrap();
        let mut by_ref = &mut v;
        NpySink::write_all(&mut by_ref, b"z").unwrap();
        assert_eq!(v, b"xyz");
        let mut io = IoSink(Vec::new());
        io.write_all(b"hello").unwrap();
        assert_eq!(io.0, b"hello");
    }
}
