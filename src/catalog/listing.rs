//! `frame ls`: every checkpoint of a job, once, with the levels that hold
//! it and the state of each.
//!
//! A job's level-1 checkpoints are spread over its node directories; one
//! checkpoint's level-1 state gathers every rank's record from all of
//! them. The states come from the records and markers alone (no data is
//! read: `frame verify` checks the data).

use super::LevelDir;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How much of a checkpoint one level holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum LevelState {
    /// Level 1: every rank's record and data file are there. Levels 2 to
    /// 4: the level's commit marker is there.
    Committed,
    /// Some ranks' files only (a checkpoint or a promotion being written,
    /// interrupted, or whose node was lost).
    Partial {
        /// Ranks whose files are there.
        ranks: u32,
        /// Ranks in the job (0 when no record says).
        of: u32,
    },
    /// A record or data file that cannot be used.
    Damaged {
        /// The ranks concerned, each with the reason.
        ranks: Vec<(u32, String)>,
    },
}

impl std::fmt::Display for LevelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Committed => write!(f, "committed"),
            Self::Partial { ranks, of } => write!(f, "partial ({ranks}/{of} ranks)"),
            Self::Damaged { ranks } => {
                let list: Vec<String> = ranks.iter().map(|(r, _)| r.to_string()).collect();
                write!(f, "damaged (rank {})", list.join(", "))
            }
        }
    }
}

/// One checkpoint of a job, over every level.
#[derive(Clone, Debug, Serialize)]
pub struct Listed {
    /// The job.
    pub job: String,
    /// Checkpoint id.
    pub id: u64,
    /// When it was written (ms since the Unix epoch; the earliest record).
    pub created_unix_ms: u64,
    /// Bytes of the ranks' data files (stored, after compression), from
    /// the records found, and of the files they hold beside them.
    pub bytes: u64,
    /// The levels holding it (1 to 4), each with its state.
    pub levels: BTreeMap<u8, LevelState>,
    /// The redundancy scheme and parameters each level above the first
    /// recorded with its commit (none in markers that predate them).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<u8, crate::topology::Rule>,
}

impl Listed {
    /// Whether some level holds the whole checkpoint.
    pub fn committed(&self) -> bool {
        self.levels.values().any(|s| *s == LevelState::Committed)
    }
}

#[derive(Default)]
struct Gathered {
    created: Option<u64>,
    bytes: BTreeMap<u32, u64>,
    world: u32,
    // level -> rank -> problem (None: sound)
    ranks: BTreeMap<u8, BTreeMap<u32, Option<String>>>,
    committed: BTreeSet<u8>,
    rules: BTreeMap<u8, crate::topology::Rule>,
}

/// Every checkpoint of every job under `levels`, by job then id.
pub fn list(levels: &[LevelDir]) -> Vec<Listed> {
    let mut all: BTreeMap<(String, u64), Gathered> = BTreeMap::new();
    for dir in levels {
        let (Some(job), Some(level)) = (dir.job.clone(), dir.level) else {
            continue;
        };
        for c in &dir.checkpoints {
            let g = all.entry((job.clone(), c.id)).or_default();
            if c.committed {
                g.committed.insert(level);
            }
            if let Some(rule) = &c.rule {
                g.rules.entry(level).or_insert_with(|| rule.clone());
            }
            let seen = g.ranks.entry(level).or_default();
            if let Some(why) = &c.error {
                seen.insert(u32::MAX, Some(why.clone()));
            }
            for r in &c.ranks {
                let problem = r
                    .record_error
                    .clone()
                    .or_else(|| r.data_error.clone())
                    .or_else(|| {
                        r.data
                            .is_none()
                            .then(|| "record without its data file".into())
                    });
                match &r.record {
                    Some(m) => {
                        g.world = g.world.max(m.world_size);
                        g.created = Some(
                            g.created
                                .map_or(m.created_unix_ms, |t| t.min(m.created_unix_ms)),
                        );
                        g.bytes.entry(r.rank).or_insert(m.file_len + r.held_bytes);
                        seen.entry(r.rank).or_insert(problem);
                    }
                    // A data file without its record is a leftover, unless
                    // the record is there and unreadable.
                    None if r.record_error.is_some() => {
                        seen.insert(r.rank, problem);
                    }
                    None => {}
                }
            }
        }
    }
    all.into_iter()
        .map(|((job, id), g)| {
            let levels = g
                .ranks
                .iter()
                .map(|(level, ranks)| {
                    let damaged: Vec<(u32, String)> = ranks
                        .iter()
                        .filter_map(|(r, p)| p.clone().map(|p| (*r, p)))
                        .collect();
                    let sound = ranks.values().filter(|p| p.is_none()).count() as u32;
                    let state = if !damaged.is_empty() {
                        LevelState::Damaged { ranks: damaged }
                    } else if (*level == 1 && g.world > 0 && sound == g.world)
                        || (*level > 1 && g.committed.contains(level))
                    {
                        LevelState::Committed
                    } else {
                        LevelState::Partial {
                            ranks: sound,
                            of: g.world,
                        }
                    };
                    (*level, state)
                })
                .collect();
            Listed {
                job,
                id,
                created_unix_ms: g.created.unwrap_or(0),
                bytes: g.bytes.values().sum(),
                levels,
                rules: g.rules,
            }
        })
        .collect()
}
