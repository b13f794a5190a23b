//! `frame verify`: every file checked, and every job's checkpoints put back
//! together across its node directories.
//!
//! Findings have three severities. *Damage* is data that is wrong or lost
//! (a bad CRC, a record that disagrees with its file or its place, a link
//! where a file should be, a committed checkpoint missing a rank's files).
//! A *warning* is a hint that is off while the data is sound (a missing or
//! stale `LATEST`). A *note* explains a state recovery handles by itself
//! (the leftovers of an interrupted checkpoint or of retention). Only damage
//! makes `frame verify` fail.

use super::findings::{Report, Severity};
use super::{LevelDir, Pointer, Tree};
use crate::format::{file_table, CheckpointFile, FormatErrorKind, Place};
use crate::level::l1::{check_held, Checked};
use crate::level::names;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the ranks hold of one checkpoint id, over a job's level directories.
#[derive(Default)]
struct Copies {
    /// Sound copies: rank -> stamp.
    sound: BTreeMap<u32, u64>,
    /// Ranks with damaged files of this checkpoint.
    damaged: BTreeSet<u32>,
    /// Where the checkpoint's directories are.
    dirs: Vec<PathBuf>,
}

fn ranks_text(ranks: &[u32]) -> String {
    let v: Vec<String> = ranks.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// Checks every checkpoint under `levels`: each data file's header and every
/// chunk CRC, each record against its file and its place, each checkpoint's
/// completeness over all ranks, and the pointers.
pub fn verify(tree: &Tree) -> Report {
    let mut report = Report::default();
    for link in &tree.links {
        report.add(
            Severity::Warning,
            link,
            "is a symbolic link, not followed (frame refuses links in its directories)",
        );
    }
    let levels = &tree.levels;
    let mut groups: BTreeMap<(String, u8), Vec<&LevelDir>> = BTreeMap::new();
    for level in levels {
        let key = (
            level.job.clone().unwrap_or_default(),
            level.level.unwrap_or(0),
        );
        groups.entry(key).or_default().push(level);
    }
    for ((job, level), dirs) in groups {
        let restorable = verify_group(&mut report, &job, level, &dirs);
        report.restorable.push((job, level, restorable));
    }
    report
}

/// Checks one job's level directories; returns the newest restorable id.
fn verify_group(report: &mut Report, job: &str, level: u8, dirs: &[&LevelDir]) -> Option<u64> {
    let mut copies: BTreeMap<u64, Copies> = BTreeMap::new();
    let mut world: BTreeSet<u32> = BTreeSet::new();
    let mut highest_rank = None;
    // Levels 2 to 4: the newest checkpoint with a commit marker.
    let mut marked: Option<u64> = None;
    if level == 3 {
        super::l3_l4::check_parity(report, job, dirs);
    }
    for dir in dirs {
        if let Pointer::Bad(why) = &dir.pointer {
            report.add(
                Severity::Damage,
                &dir.path.join(names::POINTER),
                why.clone(),
            );
        }
        if let Pointer::Names { job_id, .. } = &dir.pointer {
            if job_id != job {
                report.add(
                    Severity::Damage,
                    &dir.path.join(names::POINTER),
                    format!("names job `{job_id}` but lies in the directory of job `{job}`"),
                );
            }
        }
        for ckpt in &dir.checkpoints {
            report.checkpoints += 1;
            let entry = copies.entry(ckpt.id).or_default();
            entry.dirs.push(ckpt.path.clone());
            if let Some(e) = &ckpt.error {
                report.add(Severity::Damage, &ckpt.path, e.clone());
                continue;
            }
            if ckpt.committed {
                marked = marked.max(Some(ckpt.id));
            }
            for rank in &ckpt.ranks {
                highest_rank = highest_rank.max(Some(rank.rank));
                if let Some(r) = rank.record.as_ref() {
                    world.insert(r.world_size);
                }
                let damaged = match (level, &rank.data) {
                    (4, Some(manifest)) => {
                        match super::l3_l4::check_manifest(
                            report, job, ckpt.id, rank.rank, manifest,
                        ) {
                            Some(stamp) => RankState::Sound(stamp),
                            None => RankState::Damaged,
                        }
                    }
                    _ => check_rank(report, job, level, ckpt.id, rank, &mut world),
                };
                let entry = copies.entry(ckpt.id).or_default();
                match damaged {
                    RankState::Sound(stamp) => {
                        entry.sound.insert(rank.rank, stamp);
                    }
                    RankState::Damaged => {
                        entry.damaged.insert(rank.rank);
                    }
                    RankState::Incomplete => {}
                }
            }
        }
    }
    if world.len() > 1 {
        let sizes: Vec<u32> = world.iter().copied().collect();
        report.add(
            Severity::Damage,
            &dirs[0].path,
            format!("records of job `{job}` disagree on the number of ranks: {sizes:?}"),
        );
    }
    let size = world
        .iter()
        .max()
        .copied()
        .or(highest_rank.map(|r| r + 1))
        .unwrap_or(0);
    let complete = |c: &Copies| {
        (0..size).all(|r| c.sound.contains_key(&r))
            && c.sound.values().collect::<BTreeSet<_>>().len() == 1
    };
    let newest = copies
        .iter()
        .filter(|(_, c)| complete(c))
        .map(|(id, _)| *id)
        .max();
    let partial = dirs.iter().any(|d| d.partial);
    let pointers: Vec<(&Path, u64)> = dirs
        .iter()
        .filter_map(|d| match &d.pointer {
            Pointer::Names { checkpoint_id, .. } => Some((d.path.as_path(), *checkpoint_id)),
            _ => None,
        })
        .collect();
    let committed = if level == 1 {
        pointers.iter().map(|(_, id)| *id).max()
    } else {
        marked
    };
    for (id, c) in &copies {
        if complete(c) {
            continue;
        }
        let lacking: Vec<u32> = (0..size).filter(|r| !c.sound.contains_key(r)).collect();
        let at = c.dirs.first().cloned().unwrap_or_default();
        if lacking.is_empty() {
            report.add(
                Severity::Note,
                &at,
                format!("the ranks' copies of checkpoint {id} come from different runs; it is not restorable"),
            );
        } else if newest.is_some_and(|n| *id < n) {
            report.add(
                Severity::Note,
                &at,
                format!(
                    "checkpoint {id} is superseded by {} and partly removed (rank(s) {} have no copy)",
                    newest.unwrap_or_default(),
                    ranks_text(&lacking)
                ),
            );
        } else if !partial && committed.is_some_and(|p| p >= *id) {
            let only_damage = lacking.iter().all(|r| c.damaged.contains(r));
            if !only_damage {
                report.add(
                    Severity::Damage,
                    &at,
                    format!(
                        "checkpoint {id} was committed ({} {}) but rank(s) {} have no sound copy",
                        if level == 1 {
                            "a LATEST pointer names"
                        } else {
                            "level commit marker up to"
                        },
                        committed.unwrap_or_default(),
                        ranks_text(&lacking)
                    ),
                );
            }
        } else if !partial {
            report.add(
                Severity::Note,
                &at,
                format!(
                    "checkpoint {id} is incomplete (rank(s) {} have no sound copy): an interrupted checkpoint, which recovery does not use",
                    ranks_text(&lacking)
                ),
            );
        }
    }
    if !partial && level == 1 {
        check_pointers(report, dirs, &pointers, &copies, newest);
    }
    newest
}

/// Checks each level directory's pointer against what is complete.
fn check_pointers(
    report: &mut Report,
    dirs: &[&LevelDir],
    pointers: &[(&Path, u64)],
    copies: &BTreeMap<u64, Copies>,
    newest: Option<u64>,
) {
    let newest_text = newest.map_or("none".to_string(), |n| n.to_string());
    for dir in dirs {
        if dir.pointer == Pointer::Missing && !dir.checkpoints.is_empty() {
            report.add(
                Severity::Warning,
                &dir.path.join(names::POINTER),
                format!(
                    "missing (recovery does not need it; newest restorable checkpoint: {newest_text})"
                ),
            );
        }
    }
    for (path, id) in pointers {
        let file = path.join(names::POINTER);
        if !copies.contains_key(id) && newest.is_none_or(|n| *id > n) {
            report.add(
                Severity::Damage,
                &file,
                format!("names checkpoint {id}, which is missing"),
            );
        } else if newest.is_some_and(|n| *id < n) {
            report.add(
                Severity::Warning,
                &file,
                format!("names checkpoint {id}, but {newest_text} is complete (the pointer update was interrupted)"),
            );
        }
    }
    let distinct: BTreeSet<u64> = pointers.iter().map(|(_, id)| *id).collect();
    if distinct.len() > 1 {
        let list: Vec<String> = pointers
            .iter()
            .map(|(p, id)| format!("{} says {id}", p.display()))
            .collect();
        report.add(
            Severity::Warning,
            pointers[0].0,
            format!("the nodes' LATEST pointers disagree: {}", list.join(", ")),
        );
    }
}

enum RankState {
    Sound(u64),
    Damaged,
    Incomplete,
}

/// Checks one rank's files in one checkpoint directory.
/// Checks the program's files a checkpoint of files holds beside rank
/// `rank`'s data file `data` (level 1 only); whether they are sound.
fn check_held_files(
    report: &mut Report,
    level: u8,
    rank: u32,
    data: &Path,
    file: &CheckpointFile,
) -> bool {
    let table = match file_table::read(file) {
        Ok(Some(table)) => table,
        Ok(None) => return true,
        Err(e) => {
            report.add(Severity::Damage, data, e.to_string());
            return false;
        }
    };
    let held = file_table::held(&table);
    if held.is_empty() {
        return true;
    }
    let dir = data.parent().unwrap_or(data);
    let place = dir.join(names::held_dir(rank));
    if level != 1 {
        report.add(
            Severity::Damage,
            data,
            format!("names files held beside it, which only a level-1 copy may (level {level})"),
        );
        return false;
    }
    match check_held(dir, rank, &held) {
        Ok(Checked::Crc) => true,
        Ok(Checked::LengthOnly) => {
            report.add(
                Severity::Note,
                &place,
                "has no seal (its rank stopped while sealing): a restore checks the files' lengths only",
            );
            true
        }
        Err(e) => {
            report.add(Severity::Damage, &place, e.to_string());
            false
        }
    }
}

fn check_rank(
    report: &mut Report,
    job: &str,
    level: u8,
    id: u64,
    rank: &super::RankFiles,
    world: &mut BTreeSet<u32>,
) -> RankState {
    if let (Some(path), Some(err)) = (&rank.record_path, &rank.record_error) {
        report.add(Severity::Damage, path, err.clone());
    }
    if let (Some(path), Some(err)) = (&rank.data, &rank.data_error) {
        report.add(Severity::Damage, path, err.clone());
        return RankState::Damaged;
    }
    let data = match (&rank.data, &rank.record_path) {
        (None, Some(path)) => {
            report.add(Severity::Damage, path, "record without its data file");
            return RankState::Damaged;
        }
        (Some(data), None) => {
            report.files += 1;
            let _ = data;
            return RankState::Incomplete;
        }
        (Some(data), Some(_)) => data,
        (None, None) => return RankState::Incomplete,
    };
    report.files += 1;
    let Some(record) = &rank.record else {
        return RankState::Damaged;
    };
    world.insert(record.world_size);
    let mut sound = true;
    let place = Place {
        job_id: job,
        checkpoint_id: id,
        rank: rank.rank,
        level,
        file: &names::data_file(rank.rank),
        world_size: None,
    };
    for wrong in record.misplacements(&place) {
        report.add(Severity::Damage, data, wrong);
        sound = false;
    }
    let on_disk = std::fs::symlink_metadata(data).map_or(0, |m| m.len());
    let file = match CheckpointFile::open(data) {
        Ok(f) => f,
        Err(e) => {
            let message = match e.kind {
                FormatErrorKind::Truncated { .. } => format!(
                    "truncated: {on_disk} bytes on disk, its record says {}",
                    record.file_len
                ),
                kind if on_disk != record.file_len => format!(
                    "{kind} ({on_disk} bytes on disk, its record says {})",
                    record.file_len
                ),
                kind => kind.to_string(),
            };
            report.add(Severity::Damage, data, message);
            return RankState::Damaged;
        }
    };
    for e in file.verify() {
        report.add(Severity::Damage, &e.path, e.kind.to_string());
        sound = false;
    }
    sound &= check_held_files(report, level, rank.rank, data, &file);
    let diffs = record.differences(&file, on_disk);
    if !diffs.is_empty() {
        report.add(
            Severity::Damage,
            data,
            format!("does not match its record: {}", diffs.join("; ")),
        );
        sound = false;
    }
    if sound {
        RankState::Sound(record.stamp)
    } else {
        RankState::Damaged
    }
}
