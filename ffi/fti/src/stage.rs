//! The session's staging state: the node's stage directory and the
//! requests whose state the program has not read (the calls are in
//! `staging`).

use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::path::PathBuf;

/// A request's state: `FTI_SI_*` in `fti.h`. A move that fails is the
/// failure of `FTI_SendFile` itself, so `FTI_SI_FAIL` is never a state.
pub(crate) const SI_NINI: c_int = 0x0;
pub(crate) const SI_SCES: c_int = 0x3;

/// Requests whose state has not been read yet, at most.
pub(crate) const MAX_REQUESTS: usize = 1024;

/// The session's staging: its directory and the requests not yet read.
#[derive(Default)]
pub(crate) struct Staging {
    /// The node's stage directory, when staging is on.
    pub dir: Option<PathBuf>,
    /// Finished requests whose state the program has not read.
    done: BTreeMap<c_int, c_int>,
    next: c_int,
}

impl Staging {
    /// Staging in `dir` (created, private), or off.
    pub fn new(dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(d) = &dir {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(d) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        Ok(Self {
            dir,
            ..Self::default()
        })
    }

    /// Requests whose state the program has not read.
    pub fn waiting(&self) -> usize {
        self.done.len()
    }

    /// Records a finished request in `state`; returns its id.
    pub fn finished(&mut self, state: c_int) -> c_int {
        let id = self.next;
        self.next = self.next.checked_add(1).unwrap_or(0);
        self.done.insert(id, state);
        id
    }

    /// The state of request `id`, once: the request is forgotten.
    pub fn take(&mut self, id: c_int) -> Option<c_int> {
        self.done.remove(&id)
    }

    /// Removes the stage directory if the program left nothing in it.
    pub fn close(&self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}
