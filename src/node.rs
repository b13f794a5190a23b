//! A rank's node as the checkpointer and the manager see it: its id, its
//! local directory and its manager, decided once by whoever placed the
//! rank (frame's runtime, MPI's placement, or the configuration when
//! neither) and handed over through the communicator
//! ([`crate::comm::RuntimeLink::runtime_node`]).
//!
//! The one rule for node directories is here too: node `N` of a job keeps
//! its node-local files in `<storage.local_dir>/node-N` whenever one
//! machine holds several nodes (frame's runtime, or virtual nodes); a job
//! whose nodes are hosts uses the configured directory itself.

use crate::auth::Secret;
use std::path::{Path, PathBuf};

/// Where a rank runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePlace {
    /// The node's id.
    pub id: u32,
    /// What a runtime that started the rank says of its node; `None` for a
    /// program on its own or under MPI.
    pub runtime: Option<RuntimeNode>,
}

/// What frame's runtime gives a rank about its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeNode {
    /// The node's local directory (the runtime's `node-N` directory).
    pub dir: PathBuf,
    /// The Unix socket of the node's manager, when the runtime runs one.
    pub manager: Option<PathBuf>,
    /// The TCP address managers of other hosts reach that manager on, when
    /// the job spans hosts (`None`: they reach it at its socket).
    pub manager_peer: Option<std::net::SocketAddr>,
    /// The job's secret, which the node's manager also holds.
    pub secret: Secret,
}

impl NodePlace {
    /// A rank on node `id` that no runtime started.
    pub fn standalone(id: u32) -> Self {
        Self { id, runtime: None }
    }

    /// The level-1 directory of this rank, given the configured
    /// `storage.local_dir` and whether the configuration asks for virtual
    /// nodes (`topology.ranks_per_node` > 0): the configured directory
    /// under a runtime (which already made it the node's own), its
    /// node's folder with virtual nodes, and the configured directory
    /// otherwise.
    ///
    /// ```
    /// use frame::internals::node::NodePlace;
    /// use std::path::Path;
    /// let place = NodePlace::standalone(3);
    /// assert_eq!(place.local_dir(Path::new("/tmp/l1"), false), Path::new("/tmp/l1"));
    /// assert_eq!(place.local_dir(Path::new("/tmp/l1"), true), Path::new("/tmp/l1/node-3"));
    /// ```
    pub fn local_dir(&self, configured: &Path, virtual_nodes: bool) -> PathBuf {
        if virtual_nodes && self.runtime.is_none() {
            dir_of(configured, self.id)
        } else {
            configured.to_path_buf()
        }
    }
}

/// The name of node `id`'s directory under the job's local directory.
pub fn dir_name(id: u32) -> String {
    format!("node-{id}")
}

/// Node `id`'s directory under `base`.
pub fn dir_of(base: &Path, id: u32) -> PathBuf {
    base.join(dir_name(id))
}
