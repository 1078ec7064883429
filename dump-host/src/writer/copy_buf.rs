//! [`CopyBuf`]: the buffer a tensor's copy lives in while the writer holds it.
//!
//! Buffers from 32 KiB up are mapped straight from the kernel (anonymous `mmap`) instead of coming
//! from the process's allocator. glibc raises its own mmap threshold to the size of every
//! large block it frees, so after the first copies were freed later ones came from its heap
//! and arenas, which keep their pages when the writer frees them: memory outside the writer's
//! budget that the budget could not see (BENCHMARKS.md, "The writer's memory budget"). A
//! mapped buffer gives its pages back the moment it is dropped, and the library leaves the
//! process's allocator settings alone. Small buffers stay on the heap, where a mapping's
//! page rounding and system calls would cost more than they save.

use std::{ops::Deref, ptr::NonNull};

/// Buffers of at least this many bytes are mapped. Below glibc's own default threshold
/// (128 KiB) on purpose: the demo's 86–123 KiB copies kept 2 MiB of heap above the budget
/// at 128 KiB (BENCHMARKS.md), and a mapping is recycled by the pool like any buffer.
pub(crate) const MAP_MIN: usize = 32 * 1024;

/// A byte buffer with a fixed capacity: mapped pages from [`MAP_MIN`] bytes up, a `Vec`
/// below (or when the kernel refuses a mapping).
#[derive(Debug)]
pub(crate) struct CopyBuf(Inner);

#[derive(Debug)]
enum Inner {
    Heap(Vec<u8>),
    Mapped(Mapped),
}

/// An anonymous private mapping of `cap` bytes (a whole number of pages), `len` of them filled.
#[derive(Debug)]
struct Mapped {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: `Mapped` owns its mapping exclusively (no other pointer to it exists), like a
// `Vec<u8>` owns its allocation, so moving it to another thread or sharing `&Mapped` (which
// only reads) is as safe as for `Vec<u8>`.
unsafe impl Send for Mapped {}
// SAFETY: see `Send`: `&Mapped` gives only shared reads of initialised bytes.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps at least `len` bytes, rounded up to whole pages; `None` when the kernel refuses.
    fn new(len: usize) -> Option<Mapped> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let cap = len.checked_add(page - 1)? & !(page - 1);
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                // Populated now: the copy writes every byte at once anyway, and one call
                // that maps the pages costs less than a fault per page.
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(Mapped {
            ptr: NonNull::new(p.cast::<u8>())?,
            cap,
            len: 0,
        })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `cap` are exactly the mapping `new` made, which nothing else
        // refers to; after this the struct is gone.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.cap);
        }
    }
}

impl CopyBuf {
    /// An empty buffer with room for `len` bytes (mapped from [`MAP_MIN`] bytes up).
    pub(crate) fn with_capacity(len: usize) -> CopyBuf {
        if len >= MAP_MIN
            && let Some(m) = Mapped::new(len)
        {
            return CopyBuf(Inner::Mapped(m));
        }
        CopyBuf(Inner::Heap(Vec::with_capacity(len)))
    }

    /// Bytes of memory the buffer holds (what the budget is charged for).
    pub(crate) fn capacity(&self) -> usize {
        match &self.0 {
            Inner::Heap(v) => v.capacity(),
            Inner::Mapped(m) => m.cap,
        }
    }

    /// Whether the buffer's pages are mapped for it alone.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.0, Inner::Mapped(_))
    }

    /// Empties the buffer, keeping its memory.
    pub(crate) fn clear(&mut self) {
        match &mut self.0 {
            Inner::Heap(v) => v.clear(),
            Inner::Mapped(m) => m.len = 0,
        }
    }

    /// Appends `bytes`. A mapped buffer that would overflow moves to the heap first (callers
    /// size buffers for what they copy, so this does not happen in the writer).
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if let Inner::Mapped(m) = &mut self.0 {
            if m.cap - m.len >= bytes.len() {
                // SAFETY: `len + bytes.len() <= cap`, so the destination lies inside the mapping,
                // which cannot overlap `bytes` (a shared borrow of other memory: the mapping is
                // only reachable through `&mut self`).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        m.ptr.as_ptr().add(m.len),
                        bytes.len(),
                    );
                }
                m.len += bytes.len();
                return;
            }
            let mut v = Vec::with_capacity(m.len + bytes.len());
            v.extend_from_slice(&self[..]);
            self.0 = Inner::Heap(v);
        }
        if let Inner::Heap(v) = &mut self.0 {
            v.extend_from_slice(bytes);
        }
    }
}

impl From<Vec<u8>> for CopyBuf {
    fn from(v: Vec<u8>) -> Self {
        CopyBuf(Inner::Heap(v))
    }
}

impl Deref for CopyBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Inner::Heap(v) => v,
            // SAFETY: the first `len` bytes of the mapping are initialised (written by
            // `extend_from_slice`), the mapping lives as long as `self`, and no `&mut` to it
            // exists while `&self` is borrowed.
            Inner::Mapped(m) => unsafe { std::slice::from_raw_parts(m.ptr.as_ptr(), m.len) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of this process, from /proc/self/statm (in pages).
    fn resident_pages() -> usize {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        s.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn large_buffers_are_mapped_small_ones_are_not_and_both_hold_what_was_written() {
        let small = CopyBuf::with_capacity(MAP_MIN - 1);
        assert!(!small.is_mapped());
        let mut big = CopyBuf::with_capacity(MAP_MIN + 1);
        assert!(big.is_mapped());
        assert_eq!(big.capacity() % 4096, 0);
        assert!(big.capacity() > MAP_MIN);
        let data: Vec<u8> = (0..MAP_MIN + 1).map(|i| (i * 7 % 251) as u8).collect();
        big.extend_from_slice(&data[..1000]);
        big.extend_from_slice(&data[1000..]);
        assert_eq!(&big[..], &data[..]);
        big.clear();
        assert!(big.is_empty());
        big.extend_from_slice(&data[..5]);
        assert_eq!(&big[..], &data[..5]);
        // Past its capacity a mapped buffer moves to the heap, keeping its bytes.
        let more = vec![9u8; big.capacity()];
        big.extend_from_slice(&more);
        assert!(!big.is_mapped());
        assert_eq!(&big[..5], &data[..5]);
        assert_eq!(big.len(), 5 + more.len());
        let v: CopyBuf = vec![1u8, 2, 3].into();
        assert_eq!(&v[..], &[1, 2, 3]);
    }

    #[test]
    fn a_dropped_mapped_buffer_gives_its_pages_back() {
        const LEN: usize = 64 << 20;
        let before = resident_pages();
        let mut b = CopyBuf::with_capacity(LEN);
        b.extend_from_slice(&vec![1u8; LEN]);
        let filled = resident_pages();
        drop(b);
        let after = resident_pages();
        let page = 4096;
        // Filling touched the 64 MiB (the source Vec is freed again by then); dropping returns
        // them: a heap block of this size freed inside an arena might not be.
        assert!(
            filled >= before + LEN / page / 2,
            "{before} -> {filled} pages after filling"
        );
        assert!(
            after + LEN / page / 2 <= filled,
            "{filled} -> {after} pages after dropping"
        );
    }
}
