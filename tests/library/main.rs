//! frame's library in one process: checkpoints and their levels, program files,
//! recovery and its strategies, crashes at every file-system call, damage, full
//! disks and the files a rank holds.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod cone;
mod corruption;
mod crash;
mod files;
mod global_restart;
mod held_files;
mod huge_pages;
mod l1;
mod levels;
mod localised;
mod manager;
mod never_start_over;
mod phases;
mod pointer;
mod recovery;
mod restart_choice;
mod retention;
mod rollback;
mod shared_dirs;
mod storage;
mod sweep;
