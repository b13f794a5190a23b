//! Safe file-system access for everything frame writes.
//!
//! Other users of a machine are hostile. frame therefore reaches its files
//! only through [`Dir`] handles: a directory is opened once, checked (owned
//! by this user, not writable by anyone else, not a symbolic link), and every
//! name below it is resolved relative to that handle without following
//! symbolic links. Files are created exclusively with explicit private
//! modes, small files are replaced atomically and durably, and [`Lock`]s
//! keep two processes from using the same files.
//!
//! Every call that changes the file system passes a crash point (see
//! [`crash`]), which tests use to kill a process at each step of a protocol.

mod atomic;
pub mod crash;
mod path;

pub(crate) use atomic::AtomicFile;
pub(crate) use path::private_root_existing;
pub(crate) use path::{append_json_line, open_nofollow, read_nofollow};
pub use path::{check_base, open_append, private_root};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Whether an I/O error means the storage is full or a file-size limit was hit.
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull
            | std::io::ErrorKind::QuotaExceeded
            | std::io::ErrorKind::FileTooLarge
    )
}

/// How long [`Dir::lock`] keeps trying a lock that is held (see there).
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// A file-system operation failed, or a place is not safe to use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// An operation failed.
    #[error("cannot {op} {}: {cause}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The error (part of the message, so not a separate source).
        cause: io::Error,
    },
    /// A file or directory exists but cannot be trusted.
    #[error("refusing {}: {reason}", path.display())]
    Unsafe {
        /// The path concerned.
        path: PathBuf,
        /// Why it is not used.
        reason: String,
    },
    /// Another process holds the lock.
    #[error("{} is locked: {what}", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// What the lock protects.
        what: String,
    },
}

impl FsError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<io::Error>,
    ) -> Self {
        FsError::Io {
            op,
            path: path.into(),
            cause: source.into(),
        }
    }

    fn unsafe_at(path: &Path, reason: impl Into<String>) -> Self {
        FsError::Unsafe {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// Whether the storage ran out of space (or a file-size limit was hit).
    pub fn is_no_space(&self) -> bool {
        matches!(self, FsError::Io { cause, .. } if is_no_space(cause))
    }

    /// Whether the operation failed because the name does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound)
    }

    /// The path concerned.
    pub fn path(&self) -> &Path {
        match self {
            FsError::Io { path, .. }
            | FsError::Unsafe { path, .. }
            | FsError::Locked { path, .. } => path,
        }
    }
}

/// Result of a safe file-system operation.
pub(crate) type FsResult<T> = Result<T, FsError>;

/// The kind of a directory entry, read without following links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (socket, FIFO, device).
    Other,
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// The effective user id of this process.
pub fn my_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks that a directory can be trusted: owned by this user, and not
/// writable by group or others.
fn check_private_dir(path: &Path, st: &rustix::fs::Stat) -> FsResult<()> {
    let unsafe_ = |reason: String| FsError::unsafe_at(path, reason);
    if kind_of(FileType::from_raw_mode(st.st_mode)) != Kind::Dir {
        return Err(unsafe_("not a directory".into()));
    }
    let me = my_uid();
    if st.st_uid != me {
        return Err(unsafe_(format!(
            "owned by uid {}, not by this user (uid {me}); use a directory of your own",
            st.st_uid
        )));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        return Err(unsafe_(format!(
            "writable by other users (mode {mode:04o}); frame keeps its files only where no one else can change them: \
             use a directory of your own, or a shared one with the sticky bit such as /dev/shm (frame then makes a private directory in it)"
        )));
    }
    Ok(())
}

/// Checks that `name` is a single path component frame may create.
fn component(parent: &Path, name: &str) -> FsResult<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(FsError::Unsafe {
            path: parent.join(name),
            reason: "not a plain file name".into(),
        });
    }
    Ok(())
}

/// An open, checked directory. Names below it are resolved without
/// following symbolic links.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// Whose crash points this directory's operations count as.
    who: u32,
}

impl Dir {
    /// Opens the directory at `path`, creating it (and missing parents, each
    /// mode 0700) if it does not exist. The last component must not be a
    /// symbolic link; the directory must belong to this user and not be
    /// writable by others.
    pub fn open_or_create(path: &Path) -> FsResult<Dir> {
        if !path.exists() {
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(path)
            .map_err(|e| FsError::io("create directory", path, e))?;
        }
        Self::open(path)
    }

    /// Opens the existing directory at `path` (see [`Dir::open_or_create`]).
    pub fn open(path: &Path) -> FsResult<Dir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            rustix::fs::open(path, flags, Mode::empty()).map_err(|e| Self::open_error(path, e))?;
        Self::checked(fd, path.to_path_buf(), crash::ANYONE)
    }

    fn open_error(path: &Path, e: rustix::io::Errno) -> FsError {
        // With O_DIRECTORY a link may be reported as "not a directory".
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR if link => FsError::Unsafe {
                path: path.to_path_buf(),
                reason: "is a symbolic link (frame never follows links it did not create)".into(),
            },
            rustix::io::Errno::NOTDIR => FsError::Unsafe {
                path: path.to_path_buf(),
                reason: "not a directory".into(),
            },
            e => FsError::io("open directory", path, e),
        }
    }

    fn checked(fd: OwnedFd, path: PathBuf, who: u32) -> FsResult<Dir> {
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io("inspect", &path, e))?;
        check_private_dir(&path, &st)?;
        Ok(Dir { fd, path, who })
    }

    /// The same directory, counting its crash points (and those of its
    /// subdirectories) as `who`'s.
    pub fn counted_as(mut self, who: u32) -> Dir {
        self.who = who;
        self
    }

    /// Where the directory is (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory (for messages).
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Device and inode: identifies the directory whatever path reached it.
    pub fn identity(&self) -> (u64, u64) {
        match rustix::fs::fstat(&self.fd) {
            Ok(st) => (st.st_dev, st.st_ino),
            Err(_) => (0, 0),
        }
    }

    /// Passes a crash point for an operation on `name`.
    pub fn crash_point(&self, op: &str, name: &str) {
        crash::point(self.who, op, &self.path, name);
    }

    /// Opens subdirectory `name`, creating it (mode 0700) if `create` is set.
    pub fn sub(&self, name: &str, create: bool) -> FsResult<Dir> {
        component(&self.path, name)?;
        let path = self.join(name);
        if create {
            self.crash_point("mkdir", name);
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(FsError::io("create directory", path, e)),
            }
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())
            .map_err(|e| Self::open_error(&path, e))?;
        Self::checked(fd, path, self.who)
    }

    /// Opens subdirectory `name` if it exists.
    pub fn try_sub(&self, name: &str) -> FsResult<Option<Dir>> {
        match self.sub(name, false) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_file(&self, name: &str, flags: OFlags, op: &'static str) -> FsResult<File> {
        component(&self.path, name)?;
        let path = self.join(name);
        // NONBLOCK: opening a FIFO someone planted must not hang.
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o600)).map_err(|e| {
                match e {
                    rustix::io::Errno::LOOP => FsError::Unsafe {
                        path: path.clone(),
                        reason: "is a symbolic link (frame never follows links it did not create)"
                            .into(),
                    },
                    e => FsError::io(op, &path, e),
                }
            })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io("inspect", &path, e))?;
        if kind_of(FileType::from_raw_mode(st.st_mode)) != Kind::File {
            return Err(FsError::Unsafe {
                path,
                reason: "not a regular file".into(),
            });
        }
        if st.st_uid != my_uid() {
            return Err(FsError::Unsafe {
                path,
                reason: format!("owned by uid {}, not by this user", st.st_uid),
            });
        }
        // Back to blocking mode for ordinary use.
        let _ = rustix::fs::fcntl_setfl(
            &fd,
            rustix::fs::fcntl_getfl(&fd).unwrap_or(flags) - OFlags::NONBLOCK,
        );
        Ok(File::from(fd))
    }

    /// Opens regular file `name` for reading.
    pub fn open_read(&self, name: &str) -> FsResult<File> {
        self.open_file(name, OFlags::RDONLY, "open")
    }

    /// Opens existing regular file `name` for reading and writing.
    pub fn open_rw(&self, name: &str) -> FsResult<File> {
        self.open_file(name, OFlags::RDWR, "open")
    }

    /// Creates file `name` (mode 0600), which must not exist yet.
    pub fn create_new(&self, name: &str) -> FsResult<File> {
        self.crash_point("create", name);
        self.open_file(name, OFlags::RDWR | OFlags::CREATE | OFlags::EXCL, "create")
    }

    /// Creates file `name` (mode 0600), removing a leftover of that name first.
    pub fn create_replacing(&self, name: &str) -> FsResult<File> {
        self.remove_file(name)?;
        self.create_new(name)
    }

    /// Reads regular file `name`, refusing files larger than `max` bytes.
    pub fn read_capped(&self, name: &str, max: u64) -> FsResult<Vec<u8>> {
        let mut bytes = Vec::new();
        self.read_capped_into(name, max, &mut bytes)?;
        Ok(bytes)
    }

    /// [`read_capped`](Self::read_capped) into `bytes` (replacing what it
    /// held), reusing its memory: a reader of many files of one size pays
    /// for the buffer's pages once.
    pub fn read_capped_into(&self, name: &str, max: u64, bytes: &mut Vec<u8>) -> FsResult<()> {
        let f = self.open_read(name)?;
        bytes.clear();
        // Sized once from the file's length (at most the cap): reading
        // through `take` would otherwise grow the buffer by doubling.
        let hint = f.metadata().map_or(0, |m| m.len()).min(max);
        bytes.reserve(usize::try_from(hint).unwrap_or(0).saturating_add(1));
        f.take(max + 1)
            .read_to_end(bytes)
            .map_err(|e| FsError::io("read", self.join(name), e))?;
        if bytes.len() as u64 > max {
            return Err(FsError::Unsafe {
                path: self.join(name),
                reason: format!("larger than the {max} bytes such a file can have"),
            });
        }
        Ok(())
    }

    /// Renames `name` to `to_name` in directory `to` (replacing it).
    pub fn rename(&self, name: &str, to: &Dir, to_name: &str) -> FsResult<()> {
        component(&self.path, name)?;
        component(&to.path, to_name)?;
        self.crash_point("rename", name);
        rustix::fs::renameat(&self.fd, name, &to.fd, to_name)
            .map_err(|e| FsError::io("rename", to.join(to_name), e))
    }

    /// Makes `to_name` in directory `to` a second name of file `name` (a
    /// hard link; `name` itself is not followed if it is a link). Fails if
    /// `to_name` exists.
    pub fn link(&self, name: &str, to: &Dir, to_name: &str) -> FsResult<()> {
        component(&self.path, name)?;
        component(&to.path, to_name)?;
        self.crash_point("link", name);
        rustix::fs::linkat(&self.fd, name, &to.fd, to_name, AtFlags::empty())
            .map_err(|e| FsError::io("link", to.join(to_name), e))
    }

    /// Removes file `name`; a missing file is not an error.
    pub fn remove_file(&self, name: &str) -> FsResult<()> {
        component(&self.path, name)?;
        // The crash point is passed whether or not the file exists, so that
        // a rank's sequence of points does not depend on other ranks.
        self.crash_point("unlink", name);
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(FsError::io("remove", self.join(name), e)),
        }
    }

    /// Removes subdirectory `name` if it exists and is empty; anything else
    /// is left alone.
    pub fn remove_dir_if_empty(&self, name: &str) {
        if component(&self.path, name).is_err() {
            return;
        }
        self.crash_point("rmdir", name);
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if kind_of(FileType::from_raw_mode(st.st_mode)) == Kind::Dir => {}
            _ => return,
        }
        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR);
    }

    /// Flushes the directory's entries (new names, renames) to stable storage.
    pub fn sync(&self) -> FsResult<()> {
        self.crash_point("fsync-dir", ".");
        rustix::fs::fsync(&self.fd).map_err(|e| FsError::io("sync directory", &self.path, e))
    }

    /// What `name` is, without following links; `None` if it does not exist.
    pub fn kind(&self, name: &str) -> Option<Kind> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| kind_of(FileType::from_raw_mode(st.st_mode)))
    }

    /// Device and inode of `name`, without following links.
    pub fn identity_of(&self, name: &str) -> Option<(u64, u64)> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| (st.st_dev, st.st_ino))
    }

    /// The entries of the directory (without `.` and `..`), sorted by name.
    /// Names that are not UTF-8 are skipped: frame never creates them.
    pub fn entries(&self) -> FsResult<Vec<(String, Kind)>> {
        let dir =
            rustix::fs::Dir::read_from(&self.fd).map_err(|e| FsError::io("list", &self.path, e))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| FsError::io("list", &self.path, e))?;
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            let Some(name) = OsStr::from_bytes(raw).to_str() else {
                continue;
            };
            let kind = match entry.file_type() {
                FileType::Unknown => self.kind(name).unwrap_or(Kind::Other),
                t => kind_of(t),
            };
            out.push((name.to_string(), kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Takes the lock file `name` (created if missing, mode 0600) without
    /// waiting. `what` says what the lock protects, for the error.
    pub fn lock(&self, name: &str, what: &str) -> FsResult<Lock> {
        component(&self.path, name)?;
        let file = match self.open_rw(name) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => match self.create_new(name) {
                Ok(f) => f,
                // Someone created it in between: open theirs.
                Err(FsError::Io { cause, .. }) if cause.kind() == io::ErrorKind::AlreadyExists => {
                    self.open_rw(name)?
                }
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        // A lock this process just released can stay held for a moment by
        // a child forked in between that has not yet exec'd (the lock
        // belongs to the open file, which the child shares until exec closes
        // it): a busy lock is tried again for up to LOCK_PATIENCE.
        let deadline = std::time::Instant::now() + LOCK_PATIENCE;
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {
                    return Ok(Lock {
                        _file: file,
                        path: self.join(name),
                    })
                }
                Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(20));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(FsError::Locked {
                        path: self.join(name),
                        what: what.to_string(),
                    })
                }
                Err(e) => return Err(FsError::io("lock", self.join(name), e)),
            }
        }
    }

    /// Whether lock file `name` exists and is held by some process.
    pub fn is_locked(&self, name: &str) -> bool {
        let Ok(file) = self.open_read(name) else {
            return false;
        };
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => false,
            Err(rustix::io::Errno::WOULDBLOCK) => true,
            Err(_) => false,
        }
    }

    /// A second handle on the same directory.
    pub fn try_clone(&self) -> FsResult<Dir> {
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| FsError::io("duplicate handle of", &self.path, e))?;
        Ok(Dir {
            fd,
            path: self.path.clone(),
            who: self.who,
        })
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An advisory lock, held until dropped (or until the process dies).
#[derive(Debug)]
pub struct Lock {
    _file: File,
    path: PathBuf,
}

impl Lock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests;
