//! Every environment variable frame reads or sets, and the only module that
//! reads the process environment.
//!
//! Three families:
//! - **Settings** a user gives: [`CONFIG`] names the configuration file,
//!   and `FRAME_<SECTION>_<KEY>` overrides one key ([`config_var`]).
//! - **The runtime's handoff**: the root starts daemons and daemons start
//!   ranks and managers, each passing what the next needs. [`RANK`],
//!   [`SIZE`], [`NODE`], [`EPOCH`] and [`NODE_DIR`] are meant to be read by
//!   programs too; the `FRAME_RT_*` variables are the runtime's own.
//! - **Test hooks** that builds with the `fault-injection` feature act on.
//!
//! Other modules, and the runtime crate (`frame-runtime`), take the names
//! from here and read values through [`var`] and [`var_os`], so that what
//! frame takes from its environment can be found in one place.

use std::ffi::OsString;

/// The configuration file (when a program names none).
pub const CONFIG: &str = "FRAME_CONFIG";
/// The prefix of every frame variable; `FRAME_<SECTION>_<KEY>` overrides a
/// configuration key.
pub const PREFIX: &str = "FRAME_";

/// Rank of this process (set by `frame run`).
pub const RANK: &str = "FRAME_RANK";
/// Number of ranks (set by `frame run`).
pub const SIZE: &str = "FRAME_SIZE";
/// Node of this process (set by `frame run`).
pub const NODE: &str = "FRAME_NODE";
/// Epoch in which this rank process was started (set by `frame run`).
pub const EPOCH: &str = "FRAME_EPOCH";
/// The node's local directory (set by `frame run`).
pub const NODE_DIR: &str = "FRAME_NODE_DIR";

/// Role of a runtime process: `daemon`, `rank` or `manager` (unset: a
/// launcher or a plain program).
pub const ROLE: &str = "FRAME_RT_ROLE";
/// A rank's start: `new`, `restarted` or `standby`.
pub const STATE: &str = "FRAME_RT_STATE";
/// The daemon's Unix socket (for ranks).
pub const DAEMON: &str = "FRAME_RT_DAEMON";
/// The job's description for daemons and ranks (JSON).
pub const SPEC: &str = "FRAME_RT_SPEC";
/// The root's address (for daemons).
pub const ROOT: &str = "FRAME_RT_ROOT";
/// The Unix socket of the node's manager (for managers and ranks).
pub const MANAGER: &str = "FRAME_RT_MANAGER";
/// The job's secret (64 hexadecimal digits), for daemons, ranks and
/// managers.
pub const SECRET: &str = "FRAME_RT_SECRET";

/// `stdin`: a daemon on another host reads its handoff (the job's
/// description, the root's address and the secret) as one JSON line on
/// its standard input, never from its command line or environment.
pub const HANDOFF: &str = "FRAME_RT_HANDOFF";
/// The descriptor of a listening TCP socket a manager inherits from its
/// daemon: where managers on other hosts reach it (the same port across
/// the manager's restarts).
pub const MANAGER_FD: &str = "FRAME_RT_MANAGER_FD";
/// The address managers on other hosts reach this node's manager on (for
/// ranks).
pub const MANAGER_PEER: &str = "FRAME_RT_MANAGER_PEER";

/// Every variable the runtime sets, cleared before it starts daemons so an
/// outer job's settings never leak into an inner one.
pub const RUNTIME: &[&str] = &[
    RANK,
    SIZE,
    NODE,
    EPOCH,
    NODE_DIR,
    ROLE,
    STATE,
    DAEMON,
    SPEC,
    ROOT,
    MANAGER,
    SECRET,
    HANDOFF,
    MANAGER_FD,
    MANAGER_PEER,
];

/// The log filter of frame's processes (`tracing`'s `RUST_LOG`): carried
/// over to other hosts with the `FRAME_*` settings.
pub const LOG: &str = "RUST_LOG";

/// How frame's processes print the library's events: `plain` (one line
/// per event, the default) or `full` (timestamps, levels, module paths);
/// see the crate `frame-log`.
pub const LOG_FORMAT: &str = "FRAME_LOG_FORMAT";

/// Slurm's list of the allocation's nodes (compressed: `n[01-04],gpu7`).
pub const SLURM_NODELIST: &str = "SLURM_JOB_NODELIST";
/// Slurm's tasks per node of the allocation (`4`, or `4(x2),2`).
pub const SLURM_TASKS_PER_NODE: &str = "SLURM_TASKS_PER_NODE";

/// `<who>:<n>`: SIGKILL the process at its n-th crash point of `who`;
/// `<who>:stop:<op>:<path end>`: SIGSTOP the process at the first point
/// of `who` that does `op` on a path ending so (see the crash points of
/// the `safefs` module).
pub const CRASH_AT: &str = "FRAME_CRASH_AT";
/// A file that gets one line per crash point passed.
#[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
pub const CRASH_TRACE: &str = "FRAME_CRASH_TRACE";
/// [`CRASH_AT`] for the first manager process a daemon starts only.
pub const MANAGER_CRASH_AT: &str = "FRAME_TEST_MANAGER_CRASH_AT";

/// The variable that overrides configuration key `section.key`.
///
/// ```
/// assert_eq!(frame::env::config_var("storage.local_dir"), "FRAME_STORAGE_LOCAL_DIR");
/// ```
pub fn config_var(key: &str) -> String {
    format!("{PREFIX}{}", key.replace('.', "_").to_uppercase())
}

/// The value of `name`, if set and valid Unicode.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The value of `name`, if set.
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// Every variable of the process (those valid Unicode).
pub fn vars() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}
