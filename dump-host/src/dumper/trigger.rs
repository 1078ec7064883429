//! [`TriggerHandle`]: fires a Dumper's flight recorder from another thread.

use std::sync::Weak;

use super::shared::Shared;

/// Fires a Dumper's flight recorder from any thread: what
/// [`Dumper::trigger`](crate::Dumper::trigger) does, without a borrow of the Dumper. Cheap to
/// clone; does nothing once the Dumper is gone.
#[derive(Clone, Debug, Default)]
pub struct TriggerHandle(pub(crate) Weak<Shared>);

impl TriggerHandle {
    /// Arms a user trigger with `reason` (for example `"loss spike: 9.1 > 3 × mean"`): when
    /// the step in progress ends (or the Dumper closes), the flight recorder writes the steps
    /// it holds and that step, and `trigger.json` says `"kind": "user"` with the reason.
    /// Returns `false` when there is no flight recorder (or the Dumper is gone). A second
    /// call before the step ends is ignored.
    pub fn trigger(&self, reason: &str) -> bool {
        match self.0.upgrade() {
            Some(s) => s.arm_trigger(reason),
            None => false,
        }
    }
}
