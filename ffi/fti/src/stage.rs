//! The session's staging state: the node's stage directory, the requests
//! whose state the program has not read, the move of a file, and with
//! `head = 1` the background mover (the calls are in `staging`).
//!
//! A file is copied to a new file beside its destination, synced, renamed
//! to its destination, and only then removed from the stage directory: a
//! failure at any point leaves the program's file where it was. With
//! `head = 0` the move happens within `FTI_SendFile`, as in FTI; with
//! `head = 1`, as FTI's heads do, a thread of the rank moves the files one
//! after the other while the program goes on, and `FTI_GetStageStatus`
//! reports `FTI_SI_PEND`, `FTI_SI_ACTV`, then `FTI_SI_SCES` or
//! `FTI_SI_FAIL`. `FTI_Finalize` waits for the moves in flight.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// A request's state: `FTI_SI_*` in `fti.h`.
pub(crate) const SI_NINI: c_int = 0x0;
pub(crate) const SI_PEND: c_int = 0x1;
pub(crate) const SI_ACTV: c_int = 0x2;
pub(crate) const SI_SCES: c_int = 0x3;
pub(crate) const SI_FAIL: c_int = 0x4;

/// Requests in flight or whose state has not been read yet, at most.
pub(crate) const MAX_REQUESTS: usize = 1024;

/// Request states by id, shared with the mover.
type States = Arc<Mutex<BTreeMap<c_int, c_int>>>;

/// A move for the mover: the request's id, the file, its destination.
type Move = (c_int, PathBuf, PathBuf);

/// The thread that moves files in the background (`head = 1`).
struct Mover {
    queue: mpsc::Sender<Move>,
    thread: JoinHandle<()>,
}

/// The session's staging: its directory and the requests not yet read.
#[derive(Default)]
pub(crate) struct Staging {
    /// The node's stage directory, when staging is on.
    pub dir: Option<PathBuf>,
    /// Requests in flight or finished, whose final state the program has
    /// not read.
    states: States,
    next: c_int,
    /// Whether files move in the background.
    background: bool,
    mover: Option<Mover>,
}

impl Staging {
    /// Staging in `dir` (created, private), or off; with `background`,
    /// files move in a thread of their own.
    pub fn new(dir: Option<PathBuf>, background: bool) -> std::io::Result<Self> {
        if let Some(d) = &dir {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(d) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        Ok(Self {
            dir,
            background,
            ..Self::default()
        })
    }

    fn states(&self) -> std::sync::MutexGuard<'_, BTreeMap<c_int, c_int>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests in flight or whose state the program has not read.
    pub fn waiting(&self) -> usize {
        self.states().len()
    }

    fn next_id(&mut self) -> c_int {
        let id = self.next;
        self.next = self.next.checked_add(1).unwrap_or(0);
        id
    }

    /// Moves `from` to `to`, within the call or in the background; returns
    /// the request's id. A failure within the call is returned (the file
    /// stays where it was).
    pub fn send(&mut self, from: PathBuf, to: PathBuf) -> std::io::Result<c_int> {
        if !self.background {
            move_file(&from, &to)?;
            let id = self.next_id();
            self.states().insert(id, SI_SCES);
            return Ok(id);
        }
        if self.mover.is_none() {
            self.mover = Some(self.start()?);
        }
        let id = self.next_id();
        self.states().insert(id, SI_PEND);
        let sent = self
            .mover
            .as_ref()
            .is_some_and(|m| m.queue.send((id, from, to)).is_ok());
        if !sent {
            self.states().remove(&id);
            return Err(std::io::Error::other("the background mover stopped"));
        }
        Ok(id)
    }

    /// The background mover.
    fn start(&self) -> std::io::Result<Mover> {
        let (queue, moves) = mpsc::channel::<Move>();
        let states = Arc::clone(&self.states);
        let set = move |id, state| {
            states
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id, state);
        };
        let thread = std::thread::Builder::new()
            .name("fti-stage".into())
            .spawn(move || {
                for (id, from, to) in moves {
                    set(id, SI_ACTV);
                    match move_file(&from, &to) {
                        Ok(()) => set(id, SI_SCES),
                        Err(e) => {
                            crate::say::warning(format_args!(
                                "FTI_SendFile: request {id}: {} to {}: {e} (the file stays)",
                                from.display(),
                                to.display()
                            ));
                            set(id, SI_FAIL);
                        }
                    }
                }
            })?;
        Ok(Mover { queue, thread })
    }

    /// The state of request `id`: in flight, or its final state once (the
    /// request is then forgotten); `FTI_SI_NINI` for an id not in use.
    pub fn status(&mut self, id: c_int) -> c_int {
        let mut states = self.states();
        match states.get(&id).copied() {
            Some(s @ (SI_PEND | SI_ACTV)) => s,
            Some(s) => {
                states.remove(&id);
                s
            }
            None => SI_NINI,
        }
    }

    /// Waits for the moves in flight, then removes the stage directory if
    /// the program left nothing in it.
    pub fn close(self) {
        if let Some(Mover { queue, thread }) = self.mover {
            drop(queue);
            let _ = thread.join();
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Moves `from` to `to`: a copy beside `to`, synced and renamed, then
/// `from` removed.
fn move_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut src = std::fs::File::open(from)?;
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| std::io::Error::other("the destination names no file"))?;
    let tmp = to.with_file_name(format!(".{name}.frame-{}", std::process::id()));
    let copied = (|| {
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        std::io::copy(&mut src, &mut dst)?;
        dst.flush()?;
        dst.sync_all()?;
        std::fs::rename(&tmp, to)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied?;
    if let Some(dir) = to.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    std::fs::remove_file(from)
}
