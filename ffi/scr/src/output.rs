//! Writing datasets: `SCR_Need_checkpoint`, `SCR_Start_output` (and
//! `SCR_Start_checkpoint`), routing each file, `SCR_Complete_output` (and
//! `SCR_Complete_checkpoint`), and `SCR_Should_exit`.
//!
//! A checkpoint dataset is one of frame's checkpoints of files: each file
//! the program routes is written on the node's level-1 storage, and the
//! dataset commits on every rank with its table (see [`crate::table`]),
//! then goes to the levels SCR's parameters chose. An output dataset's
//! files go to their paths below the prefix: written there directly when
//! the dataset is output only, copied there before the commit when it is
//! both (or when `SCR_CACHE_BYPASS = 1`).

use crate::index::{Dataset, Index};
use crate::session::{self, Output, Phase, Session};
use crate::status::{guard, Failure, SCR_FAILURE};
use crate::table::{stored_name, Table, TABLE_FILE};
use frame_core::Level;
use std::os::raw::{c_char, c_int};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `SCR_FLAG_CHECKPOINT`.
const CHECKPOINT: c_int = 1;
/// `SCR_FLAG_OUTPUT`.
const OUTPUT: c_int = 2;

/// The halt file: its presence below the prefix asks the job to exit.
fn halt_file(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join("halt")
}

/// Whether rank 0 finds the job asked to exit (the halt file, or less
/// than `SCR_HALT_SECONDS` left in the allocation).
fn halting(s: &Session) -> bool {
    let late = match (s.conf.halt_seconds, s.ends_at) {
        (0, _) | (_, None) => false,
        (secs, Some(end)) => {
            std::time::SystemTime::now() + std::time::Duration::from_secs(secs) >= end
        }
    };
    late || halt_file(&s.conf.prefix).exists()
}

/// Sets `*flag` to 0 (when not NULL), so that a failed call leaves no
/// flag unset.
fn clear_flag(flag: *mut c_int) {
    if !flag.is_null() {
        // SAFETY: checked non-null; the program passes room for one int.
        unsafe { *flag = 0 };
    }
}

/// Writes `value` into `*flag`.
fn write_flag(flag: *mut c_int, value: bool) -> Result<(), Failure> {
    if flag.is_null() {
        return Err(Failure::new("the flag pointer is NULL"));
    }
    // SAFETY: checked non-null; the program passes room for one int.
    unsafe { *flag = c_int::from(value) };
    Ok(())
}

/// Sets `*flag` to 1 when the program should checkpoint now, the same on
/// every rank: a halt is pending, or every `SCR_CHECKPOINT_INTERVAL`-th
/// call, or `SCR_CHECKPOINT_SECONDS` after the last checkpoint ended, or
/// while one would cost less than `SCR_CHECKPOINT_OVERHEAD` percent (see
/// [`below_overhead`]). With none of them set, 0. Collective.
#[no_mangle]
pub extern "C" fn SCR_Need_checkpoint(flag: *mut c_int) -> c_int {
    clear_flag(flag);
    guard("SCR_Need_checkpoint", || {
        session::with(|s| {
            s.need_calls += 1;
            let c = &s.conf;
            let need = s.rank() == 0
                && (halting(s)
                    || (c.checkpoint_interval > 0 && s.need_calls % c.checkpoint_interval == 0)
                    || (c.checkpoint_seconds > 0
                        && s.last_end.elapsed().as_secs() >= c.checkpoint_seconds)
                    || (c.checkpoint_overhead > 0.0 && below_overhead(s)));
            let need = s.rank_0s(u64::from(need))? == 1;
            write_flag(flag, need)
        })
    })
}

/// Whether a checkpoint now would cost less than `SCR_CHECKPOINT_OVERHEAD`
/// percent of the time since the last one ended plus its own (the mean
/// checkpoint's), as SCR estimates it; before any checkpoint, yes (to
/// learn the cost).
fn below_overhead(s: &Session) -> bool {
    if s.checkpoints == 0 {
        return true;
    }
    let mean = s.spent.as_secs_f64() / s.checkpoints as f64;
    let since = s.last_end.elapsed().as_secs_f64();
    100.0 * mean / (since + mean).max(1e-9) < s.conf.checkpoint_overhead
}

/// Sets `*flag` to 1 when the job should checkpoint and exit: the file
/// `.scr/halt` exists below the prefix, or the allocation ends within
/// `SCR_HALT_SECONDS`. The same on every rank. Collective.
#[no_mangle]
pub extern "C" fn SCR_Should_exit(flag: *mut c_int) -> c_int {
    clear_flag(flag);
    guard("SCR_Should_exit", || {
        session::with(|s| {
            let halt = s.rank() == 0 && halting(s);
            let halt = s.rank_0s(u64::from(halt))? == 1;
            write_flag(flag, halt)
        })
    })
}

/// Starts dataset `name` (NULL: `scr.dataset.<n>`), the same on every
/// rank, with `flags` (`SCR_FLAG_CHECKPOINT`, `SCR_FLAG_OUTPUT` or
/// both). Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Start_output(name: *const c_char, flags: c_int) -> c_int {
    guard("SCR_Start_output", || {
        let given = match name.is_null() {
            true => Ok(None),
            false => {
                // SAFETY: as the caller promises.
                let text = unsafe { crate::init::text(name, "the dataset name") };
                text.map(|n| Some(n.to_string()))
            }
        };
        session::with(|s| start(s, given, flags))
    })
}

/// `SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT)`.
#[no_mangle]
pub extern "C" fn SCR_Start_checkpoint() -> c_int {
    guard("SCR_Start_checkpoint", || {
        session::with(|s| start(s, Ok(None), CHECKPOINT))
    })
}

/// Starts a dataset named `name` (or not: a name is made up). The ranks
/// agree on the name, or on why one is refused, before anything else.
fn start(
    s: &mut Session,
    name: Result<Option<String>, Failure>,
    flags: c_int,
) -> Result<(), Failure> {
    s.idle("SCR_Start_output")?;
    s.outputs += 1;
    let made_up = format!("scr.dataset.{}", s.outputs);
    let name = name.and_then(|n| {
        let name = n.unwrap_or(made_up);
        if flags & (CHECKPOINT | OUTPUT) == 0 || flags & !(CHECKPOINT | OUTPUT) != 0 {
            Err(Failure::new(format!(
                "flags {flags} are not SCR_FLAG_CHECKPOINT, SCR_FLAG_OUTPUT or both"
            )))
        } else if name.is_empty() || name.len() >= crate::restart::MAX_FILENAME {
            Err(Failure::new(format!(
                "the dataset name is empty or longer than {} bytes",
                crate::restart::MAX_FILENAME - 1
            )))
        } else {
            Ok(name)
        }
    });
    s.same_name(&name, "SCR_Start_output")?;
    let name = name?;
    let checkpoint = flags & CHECKPOINT != 0;
    if checkpoint {
        s.ckpt()?.begin_checkpoint(Level::L1)?;
    }
    s.phase = Phase::Output(Output {
        table: Table {
            name,
            flags,
            files: Vec::new(),
        },
        checkpoint,
        paths: Vec::new(),
        started: Instant::now(),
    });
    Ok(())
}

/// Where to write the file at `rel` (below the prefix) of the dataset
/// being written.
pub(crate) fn route(s: &mut Session, rel: &str) -> Result<PathBuf, Failure> {
    let Phase::Output(out) = &mut s.phase else {
        unreachable!("routing for output outside a dataset");
    };
    if out.checkpoint {
        // Routed again: the same file, as written so far.
        if let Some(n) = out.table.find(rel) {
            return Ok(out.paths[n].clone());
        }
        let n = out.table.files.len();
        let path = s.ckpt()?.checkpoint_file(&stored_name(n))?;
        if let Phase::Output(out) = &mut s.phase {
            // Entered once frame handed the file out: the table and the
            // paths stay in step.
            out.table.number(rel);
            out.paths.push(path.clone());
        }
        Ok(path)
    } else {
        let path = s.conf.prefix.join(rel);
        out.table.number(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Failure::new(format!("{}: {e}", dir.display())))?;
        }
        Ok(path)
    }
}

/// Ends the dataset being written. It counts only if every rank passes
/// `valid` = 1: a checkpoint then commits on every rank (and its output
/// files reach the prefix); otherwise it is dropped, the previous
/// checkpoint stays the newest, and the call fails. Collective.
#[no_mangle]
pub extern "C" fn SCR_Complete_output(valid: c_int) -> c_int {
    complete("SCR_Complete_output", valid)
}

/// `SCR_Complete_output`.
#[no_mangle]
pub extern "C" fn SCR_Complete_checkpoint(valid: c_int) -> c_int {
    complete("SCR_Complete_checkpoint", valid)
}

fn complete(call: &str, valid: c_int) -> c_int {
    let mut invalid = false;
    let code = guard(call, || {
        session::with(|s| {
            invalid = !complete_in(s, valid != 0)?;
            Ok(())
        })
    });
    match invalid {
        true => SCR_FAILURE,
        false => code,
    }
}

/// Ends the dataset; `Ok(false)` when some rank found it invalid.
fn complete_in(s: &mut Session, valid: bool) -> Result<bool, Failure> {
    if !matches!(s.phase, Phase::Output(_)) {
        return Err(Failure::new(
            "no dataset is being written (call SCR_Start_output first)",
        ));
    }
    let Phase::Output(out) = std::mem::replace(&mut s.phase, Phase::Idle) else {
        unreachable!("checked just above");
    };
    let all = s.all(valid)?;
    if !all {
        if out.checkpoint {
            s.ckpt()?.cancel_checkpoint()?;
        }
        if s.rank() == 0 {
            crate::say::warning(format_args!(
                "dataset {:?} is not kept: a rank passed valid = 0",
                out.table.name
            ));
        }
        return Ok(false);
    }
    if !out.checkpoint {
        return Ok(true);
    }
    let publish = out.table.flags & OUTPUT != 0 || s.conf.bypass;
    let local = write_files(s, &out, publish);
    if let Err(e) = s.agree(local) {
        s.ckpt()?.cancel_checkpoint()?;
        return Err(e);
    }
    let id = s.ckpt()?.end_checkpoint()?;
    // A new checkpoint supersedes the restart, taken or not.
    s.restored = None;
    s.exhausted = true;
    s.spent += out.started.elapsed();
    s.checkpoints += 1;
    s.last_end = Instant::now();
    if s.rank() == 0 {
        let named = Index::load(&s.conf.prefix).and_then(|mut index| {
            index.add(Dataset {
                id,
                name: out.table.name.clone(),
                flags: out.table.flags,
            });
            index.save(&s.conf.prefix)
        });
        if let Err(e) = named {
            crate::say::warning(format_args!(
                "checkpoint {:?} is kept, but the index of names is not updated: {e}",
                out.table.name
            ));
        }
    }
    if s.conf.synchronous {
        s.ckpt()?.wait_for_promotions()?;
    }
    Ok(true)
}

/// Copies the dataset's files to their paths below the prefix (when they
/// are output too), then writes its table into the checkpoint.
fn write_files(s: &mut Session, out: &Output, publish: bool) -> Result<(), String> {
    if publish {
        let rank = s.rank();
        for (rel, from) in out.table.files.iter().zip(&out.paths) {
            publish_file(from, &s.conf.prefix.join(rel), rank)?;
        }
    }
    let ckpt = s.ckpt().map_err(|f| f.message)?;
    let path = ckpt
        .checkpoint_file(TABLE_FILE)
        .map_err(|e| e.to_string())?;
    out.table.write(&path)
}

/// Copies `from` to `to` (its directories made as needed) through a file
/// beside it, synced, then renamed over it: `to` is never seen half
/// written. The new file gets the program's umask, as files it writes
/// itself; the kernel copies (no buffer of the whole file). `rank` keeps
/// the temporary names of ranks on different nodes apart.
fn publish_file(from: &Path, to: &Path, rank: usize) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let at = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| at(dir, e))?;
    let mut temp = to.as_os_str().to_owned();
    temp.push(format!(".frame-{rank}-{}", std::process::id()));
    let temp = PathBuf::from(temp);
    let copied = (|| {
        let mut source = std::fs::File::open(from).map_err(|e| at(from, e))?;
        let mut sink = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)
            .map_err(|e| at(&temp, e))?;
        std::io::copy(&mut source, &mut sink).map_err(|e| at(to, e))?;
        sink.sync_all().map_err(|e| at(to, e))?;
        std::fs::rename(&temp, to).map_err(|e| at(to, e))
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    copied
}
