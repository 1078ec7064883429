//! The graph files of a dump (`graphs/ms_output_trace_code_graph_{g}.ir|.pb`) and the graphs a
//! [`crate::Dumper`] keeps for the inspect and compare tools.

use std::{collections::BTreeMap, path::PathBuf};

use super::{Graph, UselessOutputs};
use crate::{dumper::Shared, writer::write_bytes_atomic};

/// Mode of the graph files (read-only, like every file MindSpore's dump writes).
const FILE_MODE: u32 = 0o400;

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

impl Shared {
    fn graphs_dir(&self) -> PathBuf {
        self.layout.graphs_dir()
    }

    /// Writes `graphs/ms_output_trace_code_graph_{id}.ir` and `.pb` and the execution order;
    /// failures are recorded in the writer's error log like every other write.
    pub(crate) fn write_graph(&self, id: u32, graph: &Graph) {
        self.write_execution_order(id, &graph.execution_order());
        let dir = self.graphs_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let stem = format!("ms_output_trace_code_graph_{id}");
        for (ext, bytes) in [("ir", graph.to_ir().into_bytes()), ("pb", graph.to_pb())] {
            let p = dir.join(format!("{stem}.{ext}"));
            if let Err(e) = write_bytes_atomic(&p, FILE_MODE, &bytes) {
                self.writer.errors().record(p, e);
            }
        }
    }
}
