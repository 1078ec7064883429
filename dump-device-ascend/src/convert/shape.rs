//! [`Shape`]: a fixed-capacity tensor shape (no allocation).

use crate::Error;

/// Largest rank a [`Shape`] holds: MindSpore's 8 host dimensions plus the 4 that
/// `FRACTAL_NZ` uses for the last two.
pub const MAX_RANK: usize = 12;

/// A tensor shape of at most [`MAX_RANK`] dimensions, stored inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    len: usize,
}

impl Shape {
    /// A shape from `dims`; more than [`MAX_RANK`] dimensions give [`Error::Overflow`].
    pub fn new(dims: &[usize]) -> Result<Shape, Error> {
        let mut s = Shape {
            dims: [0; MAX_RANK],
            len: 0,
        };
        for &d in dims {
            s.push(d)?;
        }
        Ok(s)
    }

    /// Appends a dimension.
    pub fn push(&mut self, d: usize) -> Result<(), Error> {
        if self.len == MAX_RANK {
            return Err(Error::Overflow);
        }
        self.dims[self.len] = d;
        self.len += 1;
        Ok(())
    }

    /// The dimensions.
    pub fn as_slice(&self) -> &[usize] {
        &self.dims[..self.len]
    }
}

impl core::ops::Deref for Shape {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity() {
        let s = Shape::new(&[1, 2, 3]).unwrap();
        assert_eq!(&*s, &[1, 2, 3]);
        assert!(Shape::new(&[1; MAX_RANK]).is_ok());
        assert_eq!(Shape::new(&[1; MAX_RANK + 1]), Err(Error::Overflow));
    }
}
