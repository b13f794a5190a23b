//! Paths reached without a [`Dir`](super::Dir): no-follow opens and reads for tools,
//! and the check of a shared base directory.

use super::{kind_of, my_uid, FsError, FsResult, Kind};
use rustix::fs::{FileType, OFlags};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Opens the regular file at `path` for reading without following a
/// symbolic link at its last component (for tools that read trees they did
/// not open through a [`Dir`](super::Dir)).
pub(crate) fn open_nofollow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let _ = rustix::fs::fcntl_setfl(
        &f,
        rustix::fs::fcntl_getfl(&f).unwrap_or(OFlags::empty()) - OFlags::NONBLOCK,
    );
    Ok(f)
}

/// Reads the regular file at `path` (see [`open_nofollow`]), refusing one
/// larger than `max` bytes.
pub(crate) fn read_nofollow(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_nofollow(path)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// Checks that `path` is a safe place to make private entries in: owned by
/// this user or by root, and, if others may write to it, sticky (so that
/// they cannot rename or remove what this user creates there).
pub fn check_base(path: &Path) -> FsResult<()> {
    let st = rustix::fs::stat(path).map_err(|e| FsError::io("inspect", path, e))?;
    let unsafe_ = |reason: String| FsError::unsafe_at(path, reason);
    if kind_of(FileType::from_raw_mode(st.st_mode)) != Kind::Dir {
        return Err(unsafe_("not a directory".into()));
    }
    let me = my_uid();
    if st.st_uid != me && st.st_uid != 0 {
        return Err(unsafe_(format!(
            "owned by uid {}, who could rename or replace what this user (uid {me}) makes in it",
            st.st_uid
        )));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(unsafe_(format!(
            "writable by other users without the sticky bit (mode {mode:04o}), so they could rename or remove what frame makes in it; \
             use a directory of your own, or a shared one with the sticky bit such as /dev/shm"
        )));
    }
    Ok(())
}

/// The directory frame keeps a storage setting's files in.
///
/// A directory that other users may write to, but only through the sticky
/// bit (`/dev/shm`, `/tmp`, a tmpfs mounted with its default mode 1777),
/// is shared by everyone on the node: frame never writes directly into it
/// and never asks anyone to change its mode. It makes this user's private
/// subdirectory `frame-<uid>` in it instead (mode 0700, created without
/// following a link, its owner and mode checked) and returns that.
///
/// Any other `path` is returned as it is: a missing one is created private
/// where it is used, one of this user's is checked there. A directory
/// others can write to without the sticky bit, a shared one owned by
/// another user, a symbolic link or a file are refused.
pub fn private_root(path: &Path) -> FsResult<PathBuf> {
    private_root_in(path, true)
}

/// Where [`private_root`] puts this user's files, without creating
/// anything: for tools that read what jobs left (`frame ls /dev/shm`).
pub(crate) fn private_root_existing(path: &Path) -> FsResult<PathBuf> {
    private_root_in(path, false)
}

/// The name of this user's private directory inside a shared one.
fn private_name() -> String {
    format!("frame-{}", my_uid())
}

fn private_root_in(path: &Path, create: bool) -> FsResult<PathBuf> {
    let st = match rustix::fs::lstat(path) {
        Ok(st) => st,
        // Missing (or below a file): where it is used says so.
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(path.to_path_buf()),
        Err(e) => return Err(FsError::io("inspect", path, e)),
    };
    let unsafe_ = |reason: String| FsError::unsafe_at(path, reason);
    match kind_of(FileType::from_raw_mode(st.st_mode)) {
        Kind::Dir => {}
        Kind::Symlink => {
            return Err(unsafe_(
                "is a symbolic link (frame never follows links it did not create); name the directory it points to".into(),
            ))
        }
        _ => return Err(unsafe_("not a directory".into())),
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 == 0 {
        return Ok(path.to_path_buf());
    }
    check_base(path)?;
    let name = private_name();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let base = rustix::fs::open(path, flags, rustix::fs::Mode::empty())
        .map_err(|e| FsError::io("open directory", path, e))?;
    let mine = path.join(&name);
    if create {
        match rustix::fs::mkdirat(&base, name.as_str(), rustix::fs::Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(FsError::io("create directory", &mine, e)),
        }
    }
    let fd = rustix::fs::openat(&base, name.as_str(), flags, rustix::fs::Mode::empty()).map_err(
        |e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => FsError::unsafe_at(
                &mine,
                "is not a directory of this user's (frame never follows links it did not create)",
            ),
            e => FsError::io("open directory", &mine, e),
        },
    )?;
    let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io("inspect", &mine, e))?;
    super::check_private_dir(&mine, &st)?;
    Ok(mine)
}

/// Opens `path` for appending (JSON-lines metrics): created mode 0600 if
/// missing, never through a symbolic link. Each `write` of a line lands
/// whole, even with several processes appending.
pub fn open_append(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Appends `value` to the JSON-lines file at `path` as one line, in one write.
pub(crate) fn append_json_line<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    open_append(path)?.write_all(&line)
}
