//! [`Graphs`]: the part of a [`crate::Dumper`] that keeps the graphs described to it (for
//! [`Dumper::graph`](crate::Dumper::graph) and to write each description's files once), and
//! the useless-output policy read with the first one. The graphs themselves are pure
//! description ([`crate::graph`]); their files are written by [`super::metadata`].
//!
//! Each description gets a [`GraphToken`] (unique in the process) and, once, the answer to
//! "can any step dump anything of this graph" (the Dumper's `kernels` filter against its
//! kernel and parameter names), so that a runtime's step need not compare graphs nor ask
//! the filter per kernel to learn that nothing is to be done.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicU64, Ordering},
};

use crate::graph::{Graph, UselessOutputs};

/// Names one description of a graph held by one [`crate::Dumper`]: unique in the process
/// (two Dumpers, or two descriptions of the same graph id, never share a token), so a
/// runtime that kept the token of its last description knows from one comparison that the
/// Dumper still holds it ([`Dumper::graph_token`](crate::Dumper::graph_token)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphToken(u64);

/// The next token (0 is never given).
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// One described graph.
#[derive(Debug)]
struct Described {
    graph: Graph,
    token: GraphToken,
    /// No step of the Dumper can dump any kernel or parameter of it.
    quiet: bool,
}

/// The graphs described to a Dumper, and the useless-output policy read when the first one was.
#[derive(Debug, Default)]
pub(crate) struct Graphs {
    graphs: BTreeMap<u32, Described>,
    policy: Option<(UselessOutputs, Option<String>)>,
}

impl Graphs {
    /// Records graph `id` (replacing an earlier description of it); `quiet`: no step can
    /// dump any kernel or parameter of it. Returns its new token.
    pub(crate) fn insert(&mut self, id: u32, graph: &Graph, quiet: bool) -> GraphToken {
        let token = GraphToken(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
        self.graphs.insert(
            id,
            Described {
                graph: graph.clone(),
                token,
                quiet,
            },
        );
        if self.policy.is_none() {
            self.policy = Some(UselessOutputs::from_env());
        }
        token
    }

    /// Graph `id`, when described.
    pub(crate) fn get(&self, id: u32) -> Option<&Graph> {
        self.graphs.get(&id).map(|d| &d.graph)
    }

    /// The token of graph `id`'s description.
    pub(crate) fn token(&self, id: u32) -> Option<GraphToken> {
        self.graphs.get(&id).map(|d| d.token)
    }

    /// Whether graph `id` is described and no step can dump any kernel or parameter of it.
    pub(crate) fn quiet(&self, id: u32) -> bool {
        self.graphs.get(&id).is_some_and(|d| d.quiet)
    }

    /// Graph `id`'s kernels are now named by an execution order, not by its description
    /// ([`Dumper::begin_graph`](crate::Dumper::begin_graph)): its steps are no longer known
    /// to dump nothing.
    pub(crate) fn unsettle(&mut self, id: u32) {
        if let Some(d) = self.graphs.get_mut(&id) {
            d.quiet = false;
        }
    }

    /// The useless-output policy and its warning (environment read once, at the first graph).
    pub(crate) fn policy(&self) -> (UselessOutputs, Option<&str>) {
        match &self.policy {
            Some((p, w)) => (*p, w.as_deref()),
            None => (UselessOutputs::from_env().0, None),
        }
    }
}
