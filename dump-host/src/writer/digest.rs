//! Digests computed off the caller's thread: a [`DigestSlot`] is where a writer job leaves a
//! tensor's MD5 and SHA-1, and a [`DigestPromise`] is the job's side of it, which fills the
//! slot with a failure if the job ends (returns, panics or is dropped unrun) without a digest,
//! so whoever waits on the slot is never left waiting.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The digests of one tensor, as its statistic row needs them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Digests {
    /// MD5 of the bytes (when the row has an `md5` column).
    pub(crate) md5: Option<[u8; 16]>,
    /// MindSpore's SHA-1 of the bytes (when the row has a `hash:sha1` column).
    pub(crate) sha1: Option<[u8; 20]>,
}

/// Where one tensor's digests arrive.
#[derive(Debug, Default)]
pub(crate) struct DigestSlot {
    state: Mutex<Option<Result<Digests, String>>>,
    filled: Condvar,
}

impl DigestSlot {
    /// An empty slot and the promise that fills it.
    pub(crate) fn new() -> (Arc<DigestSlot>, DigestPromise) {
        let slot = Arc::new(DigestSlot::default());
        (Arc::clone(&slot), DigestPromise(Some(slot)))
    }

    /// `true` once the digests (or the failure) are in.
    pub(crate) fn ready(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Waits for the digests; `Err` says why there are none.
    pub(crate) fn wait(&self) -> Result<Digests, String> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(r) = st.as_ref() {
                return r.clone();
            }
            st = self.filled.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn fill(&self, r: Result<Digests, String>) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.is_none() {
            *st = Some(r);
        }
        self.filled.notify_all();
    }
}

/// A job's promise to fill a [`DigestSlot`]. Dropped unfulfilled, it fills the slot with a
/// failure.
#[derive(Debug)]
pub(crate) struct DigestPromise(Option<Arc<DigestSlot>>);

impl DigestPromise {
    /// Fills the slot with `r`.
    pub(crate) fn fulfil(mut self, r: Result<Digests, String>) {
        if let Some(slot) = self.0.take() {
            slot.fill(r);
        }
    }
}

impl Drop for DigestPromise {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.fill(Err(
                "the writer job hashing this tensor ended without its digest".to_owned(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fulfilled_slot_gives_its_digests() {
        let (slot, promise) = DigestSlot::new();
        assert!(!slot.ready());
        let d = Digests {
            md5: Some([7; 16]),
            sha1: None,
        };
        let waiter = {
            let slot = Arc::clone(&slot);
            std::thread::spawn(move || slot.wait())
        };
        promise.fulfil(Ok(d));
        assert!(slot.ready());
        assert_eq!(waiter.join().unwrap(), Ok(d));
    }

    #[test]
    fn a_dropped_promise_fails_the_slot_instead_of_leaving_it_waiting() {
        let (slot, promise) = DigestSlot::new();
        let waiter = {
            let slot = Arc::clone(&slot);
            std::thread::spawn(move || slot.wait())
        };
        // A job that panics drops its promise while unwinding.
        let r = std::thread::spawn(move || {
            let _p = promise;
            panic!("job failed");
        })
        .join();
        assert!(r.is_err());
        let got = waiter.join().unwrap();
        assert!(got.unwrap_err().contains("without its digest"));
    }
}
