//! [`Graphs`]: the part of a [`crate::Dumper`] that keeps the graphs described to it (for
//! [`Dumper::graph`](crate::Dumper::graph) and to write each description's files once), and
//! the useless-output policy read with the first one. The graphs themselves are pure
//! description ([`crate::graph`]); their files are written by [`super::metadata`].

use std::collections::BTreeMap;

use crate::graph::{Graph, UselessOutputs};

/// The graphs described to a Dumper, and the useless-output policy read when the first one was.
#[derive(Debug, Default)]
pub(crate) struct Graphs {
    graphs: BTreeMap<u32, Graph>,
    policy: Option<(UselessOutputs, Option<String>)>,
}

impl Graphs {
    /// Records graph `id` (replacing an earlier description of it).
    pub(crate) fn insert(&mut self, id: u32, graph: &Graph) {
        self.graphs.insert(id, graph.clone());
        if self.policy.is_none() {
            self.policy = Some(UselessOutputs::from_env());
        }
    }

    /// Graph `id`, when described.
    pub(crate) fn get(&self, id: u32) -> Option<&Graph> {
        self.graphs.get(&id)
    }

    /// The useless-output policy and its warning (environment read once, at the first graph).
    pub(crate) fn policy(&self) -> (UselessOutputs, Option<&str>) {
        match &self.policy {
            Some((p, w)) => (*p, w.as_deref()),
            None => (UselessOutputs::from_env().0, None),
        }
    }
}
