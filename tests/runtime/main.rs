//! The runtime's own mechanics under `frame run` on one machine: launching,
//! failure detection, the root's lease, a stopped manager, hardening. Mostly
//! waiting (on heartbeats, leases and timeouts): `scripts/test` runs it beside
//! the rest.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod detection;
mod runtime;
mod runtime_hardening;
mod stopped_manager;
