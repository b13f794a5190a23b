//! The library's insides that frame's own crates use: the runtime
//! (`frame-runtime`), the `frame` tool (`frame-cli`: `inspect`, `verify`,
//! `clean`), libframe and libfti, and frame's tests and benches.
//!
//! Programs do not need anything here: they use the crate root
//! ([`Checkpointer`](crate::Checkpointer), [`Config`](crate::Config),
//! regions, [`Level`](crate::Level), errors) and the modules
//! [`comm`](crate::comm), [`config`](crate::config), [`env`](crate::env),
//! [`metrics`](crate::metrics), [`region`](crate::region) and
//! `dedicated` (feature `mpi`). What is here may change in any
//! release.

/// The job's secret and the handshake every connection passes.
pub mod auth {
    pub use crate::auth::{
        accept, accept_within, connect_retrying, connect_retrying_within, Channel, Gate, Pass,
        Secret, HANDSHAKE_TIMEOUT,
    };
}

/// The checkpoint file format.
pub mod format {
    pub use crate::format::{layout, Compression, Metadata, MAX_RECORD, VERSION};
}

/// Where checkpoint copies live: level stores and the catalog that
/// `frame inspect`, `verify` and `clean` read.
pub mod level {
    /// A job's storage as `frame inspect`, `verify`, `drop` and `clean`
    /// read it.
    pub mod catalog {
        pub use crate::catalog::*;
    }
    pub use crate::level::{
        erasure, l1, CopyStore, Fence, GlobalStore, L4Write, Pieces, StorageError,
    };
}

/// The redundancy schemes: the erasure code a group manifest names.
pub mod scheme {
    pub use crate::scheme::erasure_code;
}

/// The managers that promote checkpoints to levels 2 to 4.
pub mod manager {
    pub use crate::manager::{
        inline, socket_in, Client, Manager, Options, Progress, Reply, Request, Task,
    };
}

/// A rank's node and its local directory.
pub mod node {
    pub use crate::node::{dir_name, dir_of, NodePlace, RuntimeNode};
}

/// Checked directory handles, no-follow opens, locks and crash points.
pub mod safefs {
    pub use crate::safefs::{
        check_base, crash, my_uid, open_append, private_root, Dir, FsError, Kind, Lock,
    };
}

/// Where the ranks are, and the layout recorded with each commit.
pub mod topology {
    pub use crate::topology::{Layout, Rule, Topology};
}

/// Localised recovery: the dependency cone of a failure (`frame sim`
/// reproduces the data-flow rollback paper with it).
pub mod recovery {
    pub use crate::recovery::cone::{chain, grid, Cone, ConeError, Role};

    /// The region id under which a checkpoint keeps its rank's message
    /// counts (see `frame::comm::MessageCounts`).
    pub const MESSAGE_COUNTS_REGION: crate::region::RegionId = crate::checkpoint::messages::REGION;
}
