//! The house itself: the architecture's rules, the documents' links and the
//! machine setup the tests rely on. Reads files; builds nothing.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod docs;
mod setup;
