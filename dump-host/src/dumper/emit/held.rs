//! Device tensors the flight recorder holds without waiting for the bus: the host copy is
//! queued on the device ([`DeviceTensor::copy_to_host_deferred`](dump_stats::DeviceTensor)),
//! the room for it taken from the recorder's budget at once, and the tensor's statistic row
//! computed from the bytes when they land, at the end of the step ([`Emit::settle`]), in its
//! place among the step's rows.

use super::{DeviceView, Emit, Owner, To};
use crate::{
    Error,
    config::NonFinitePolicy,
    dumper::flight::{Held, Order, PendingHeld, StepRecord},
};

impl Emit<'_> {
    /// Holds device tensor `v` (`elems` elements, `len` bytes, whole and in its stored
    /// layout) in step `rec` with its copy queued on the device, when the plan saves tensors,
    /// nothing needs its values before the step ends (no `stop` on a watched output, no
    /// per-call document) and the budget has room. `false`: copy it now.
    pub(super) fn hold_deferred(
        &self,
        rec: &StepRecord,
        who: Owner<'_>,
        v: &DeviceView<'_>,
        (elems, len): (usize, usize),
    ) -> Result<bool, Error> {
        let Some(r) = self.recorder else {
            return Ok(false);
        };
        let stops = self.watches(who, v.dtype) && self.plan.on_nonfinite == NonFinitePolicy::Stop;
        if !self.plan.saved_data.tensors() || stops || who.entry.is_some() || v.converted {
            return Ok(false);
        }
        // Validated now, as for a file written at once: a bad tensor is an error value.
        dump_npy::NpyLayout::new(v.dtype, v.shape, len, self.out.files.opts())
            .map_err(|e| who.error(e.to_string()))?;
        if !r.reserve(rec, len) {
            return Ok(false);
        }
        let copy = match v.device.copy_to_host_deferred() {
            Ok(Some(c)) if c.len() == len => c,
            // Not deferred (or a length the backend got wrong: its copy is waited for as it
            // drops, and the tensor copied now).
            _ => return Ok(false),
        };
        let ts = self.out.tree.timestamp();
        let name = self.out.tree.tensor_file(who.id(ts), v.format, v.dtype);
        let pending = PendingHeld {
            copy,
            op_type: who.op_type.to_owned(),
            kernel: who.full_name.to_owned(),
            io: who.io,
            slot: who.slot,
            ts,
            elems,
        };
        r.hold_pending(rec, name, (v.dtype, v.shape), pending);
        Ok(true)
    }

    /// The deferred copies of step `rec` land, in report order: each one's row (or watch
    /// statistics) is computed from its bytes and put in its place among the step's rows, and
    /// `after` told (with the tensor's [`Order`]) so a non-finite output is noted where it was
    /// reported. A copy that fails is let go; the first failure (or `after`'s first error) is
    /// returned.
    pub(crate) fn settle(
        &self,
        rec: &StepRecord,
        after: &dyn Fn(&To<'_>, Owner<'_>, Order) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(r) = self.recorder else {
            return Ok(());
        };
        let any = rec
            .lock()
            .entries
            .iter()
            .any(|e| matches!(e, Held::Npy(n) if n.pending.is_some()));
        if !any {
            return Ok(());
        }
        let old = std::mem::take(&mut rec.lock().entries);
        let mut first: Option<Error> = None;
        for (i, e) in old.into_iter().enumerate() {
            let mut n = match e {
                Held::Npy(n) if n.pending.is_some() => n,
                other => {
                    rec.lock().entries.push(other);
                    continue;
                }
            };
            let (Some(p), Some(mut buf)) = (n.pending.take(), n.bytes.take()) else {
                continue; // not reached: a pending copy keeps its buffer
            };
            let who = Owner {
                op_type: &p.op_type,
                full_name: &p.kernel,
                io: p.io,
                slot: p.slot,
                entry: None,
            };
            buf.resize(n.len, 0);
            if let Err(e) = p.copy.wait_into(&mut buf[..n.len]) {
                r.lost(rec, buf.capacity());
                first.get_or_insert(who.error(format!(
                    "the flight recorder's device copy failed: {e} (its row and file are not \
                     held)"
                )));
                continue;
            }
            let to = To::new(&rec.dir, Some(rec));
            // Pushes the row (held) before the file, as a tensor copied at once is held.
            let row =
                self.row_or_watch(&to, who, (p.ts, n.dtype, &n.shape), &buf[..n.len], p.elems);
            n.bytes = Some(buf);
            rec.lock().entries.push(Held::Npy(n));
            if let Err(m) = row {
                first.get_or_insert(who.error(m));
            }
            if let Err(e) = after(&to, who, 2 * i + 1) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
