//! `frame drop`: removing one checkpoint of a job from every level.
//!
//! The same rules as `frame clean`: only files frame makes are removed,
//! through checked directory handles that follow no link, and nothing is
//! touched while a rank of the job runs. Within a checkpoint what makes it
//! count goes first (the level-1 pointer naming it, a level's commit
//! marker, the group manifest, the records), then the data, so that an
//! interrupted drop leaves a checkpoint that is whole or one recovery
//! passes over, never a marker naming missing files. Level 4 also removes
//! the chunks no other checkpoint references; its archive keeps its copy.

use super::{LevelDir, Pointer, Removal};
use crate::level::global::GlobalStore;
use crate::level::names;
use crate::level::StorageError;

/// Removes checkpoint `id` from every level directory in `levels` (those
/// of one job). Refuses, before removing anything, if a rank of one of
/// them is running.
pub fn drop_checkpoint(levels: &[&LevelDir], id: u64) -> Result<Vec<Removal>, StorageError> {
    let opened = super::clean::open_idle(levels)?;
    let mut out = Vec::new();
    for (level, dir) in levels.iter().zip(&opened) {
        if !level.checkpoints.iter().any(|c| c.id == id) {
            continue;
        }
        let mut removal = Removal {
            path: dir.path().to_path_buf(),
            checkpoints: vec![id],
            kept: Vec::new(),
        };
        if level.level == Some(4) {
            let (Some(global), Some(job)) = (
                level.path.parent().and_then(|j| j.parent()),
                level.job.as_deref(),
            ) else {
                continue;
            };
            if let Some(store) = GlobalStore::open_existing(global, job)? {
                store.drop_checkpoint(id)?;
            }
        } else {
            let names_it = matches!(&level.pointer, Pointer::Names { checkpoint_id, .. } if *checkpoint_id == id);
            if level.level == Some(1) && names_it {
                dir.remove_file(names::POINTER)?;
            }
            super::clean::remove_local(dir, id, &mut removal)?;
        }
        out.push(removal);
    }
    Ok(out)
}
