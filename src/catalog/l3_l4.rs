//! `frame verify` for what levels 3 and 4 add: parity shards recomputed
//! from their group's files, and level-4 manifests checked chunk by chunk.

use super::findings::{Report, Severity};
use super::LevelDir;
use crate::format::{Metadata, Place, MAX_RECORD};
use crate::level::erasure::{parity_file, GroupManifest, ParityKey, Stripes};
use crate::level::global::{rank_chunks, ChunkReader, Manifest};
use crate::level::names;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Checks a rank's level-4 manifest at `path`: its record's place, and every
/// chunk it names (present where it says, with its hash). Returns the
/// stamp when everything is sound.
pub(super) fn check_manifest(
    report: &mut Report,
    job: &str,
    id: u64,
    rank: u32,
    path: &Path,
) -> Option<u64> {
    let bytes = match crate::safefs::read_nofollow(path, MAX_RECORD) {
        Ok(b) => b,
        Err(e) => {
            report.add(Severity::Damage, path, e.to_string());
            return None;
        }
    };
    let manifest: Manifest = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            report.add(Severity::Damage, path, format!("unreadable manifest: {e}"));
            return None;
        }
    };
    let place = Place {
        job_id: job,
        checkpoint_id: id,
        rank,
        level: 4,
        file: &names::data_file(rank),
        world_size: None,
    };
    let mut sound = true;
    for wrong in manifest.record.misplacements(&place) {
        report.add(Severity::Damage, path, wrong);
        sound = false;
    }
    let total: u64 = manifest.chunks.iter().map(|c| c.len).sum();
    if total != manifest.record.file_len {
        report.add(
            Severity::Damage,
            path,
            format!(
                "its chunks hold {total} bytes, its record says {}",
                manifest.record.file_len
            ),
        );
        sound = false;
    }
    // <level dir>/ckpt-<id>/<manifest> -> the rank's chunks.
    let chunks = path
        .parent()
        .and_then(Path::parent)
        .map(|l| rank_chunks(l, rank))
        .unwrap_or_default();
    match crate::safefs::Dir::open(&chunks) {
        Ok(dir) => {
            let mut reader = ChunkReader::new(dir);
            for c in &manifest.chunks {
                if let Err(e) = reader.read(c) {
                    report.add(
                        Severity::Damage,
                        &chunks.join(c.place().0),
                        format!("a chunk {} names: {e}", path.display()),
                    );
                    sound = false;
                }
            }
        }
        Err(e) if manifest.chunks.is_empty() && e.is_not_found() => {}
        Err(e) => {
            report.add(
                Severity::Damage,
                &chunks,
                format!("the chunks {} names cannot be read: {e}", path.display()),
            );
            sound = false;
        }
    }
    report.files += 1;
    sound.then_some(manifest.record.stamp)
}

/// One level-3 checkpoint directory of a node.
struct Member {
    dir: PathBuf,
    node: Option<u32>,
    group: Option<GroupManifest>,
}

/// Recomputes the parity of every level-3 checkpoint whose whole group is
/// under the verified tree, and compares it with the shards kept.
pub(super) fn check_parity(report: &mut Report, job: &str, dirs: &[&LevelDir]) {
    let mut by_id: BTreeMap<u64, Vec<Member>> = BTreeMap::new();
    for d in dirs {
        for c in &d.checkpoints {
            let node = c
                .ranks
                .iter()
                .find_map(|r| r.record.as_ref())
                .map(|m: &Metadata| m.node);
            let group = c
                .group
                .as_ref()
                .and_then(|p| read_group(report, p, job, c.id));
            by_id.entry(c.id).or_default().push(Member {
                dir: c.path.clone(),
                node,
                group,
            });
        }
    }
    for (id, members) in by_id {
        let mut groups: Vec<&GroupManifest> =
            members.iter().filter_map(|m| m.group.as_ref()).collect();
        groups.dedup_by(|a, b| a.nodes == b.nodes);
        for g in groups {
            let dirs: Vec<Option<&PathBuf>> = g
                .nodes
                .iter()
                .map(|n| members.iter().find(|m| m.node == Some(*n)).map(|m| &m.dir))
                .collect();
            if dirs.iter().any(Option::is_none) {
                let missing: Vec<String> = g
                    .nodes
                    .iter()
                    .zip(&dirs)
                    .filter(|(_, d)| d.is_none())
                    .map(|(n, _)| n.to_string())
                    .collect();
                let at = dirs
                    .iter()
                    .flatten()
                    .next()
                    .map_or(PathBuf::new(), |p| (*p).clone());
                report.add(
                    Severity::Note,
                    &at,
                    format!(
                        "parity of checkpoint {id} not recomputed: the level-3 files of node(s) {} are not under the verified directory",
                        missing.join(", ")
                    ),
                );
                continue;
            }
            let dirs: Vec<&PathBuf> = dirs.into_iter().flatten().collect();
            if let Err((path, why)) = recompute(g, &dirs) {
                report.add(Severity::Damage, &path, why);
            }
        }
    }
}

fn read_group(report: &mut Report, path: &Path, job: &str, id: u64) -> Option<GroupManifest> {
    let parsed = crate::safefs::read_nofollow(path, MAX_RECORD)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            serde_json::from_slice::<GroupManifest>(&b)
                .map_err(|e| format!("unreadable group manifest: {e}"))
        });
    match parsed {
        Ok(g) if g.job_id == job && g.checkpoint_id == id => Some(g),
        Ok(g) => {
            report.add(
                Severity::Damage,
                path,
                format!(
                    "describes checkpoint {} of job `{}`",
                    g.checkpoint_id, g.job_id
                ),
            );
            None
        }
        Err(e) => {
            report.add(Severity::Damage, path, e);
            None
        }
    }
}

/// Rebuilds each member's blob from its files and checks every parity shard.
fn recompute(g: &GroupManifest, dirs: &[&PathBuf]) -> Result<(), (PathBuf, String)> {
    let s = Stripes {
        g: g.nodes.len(),
        p: g.parity as usize,
    };
    let piece = g.piece as usize;
    let mut blobs = Vec::with_capacity(s.g);
    for (pos, entries) in g.blobs.iter().enumerate() {
        let mut blob = Vec::new();
        for e in entries {
            for (name, len) in [
                (names::record_file(e.rank), e.record_len),
                (names::data_file(e.rank), e.data_len),
            ] {
                let path = dirs[pos].join(&name);
                let bytes = crate::safefs::read_nofollow(&path, len)
                    .map_err(|err| (path.clone(), err.to_string()))?;
                if bytes.len() as u64 != len {
                    return Err((
                        path,
                        format!("holds {} bytes, the group manifest says {len}", bytes.len()),
                    ));
                }
                blob.extend_from_slice(&bytes);
            }
        }
        if blob.len() > piece * s.k() {
            return Err((
                dirs[pos].clone(),
                "files larger than the group's pieces".into(),
            ));
        }
        blob.resize(piece * s.k(), 0);
        blobs.push(blob);
    }
    let codec = crate::scheme::erasure_code(&g.code, s.k(), s.p)
        .map_err(|e| (dirs[0].clone(), e.to_string()))?;
    for t in 0..s.g {
        let data: Vec<&[u8]> = s
            .data_nodes(t)
            .into_iter()
            .map(|pos| {
                let q = s
                    .data_stripes(pos)
                    .iter()
                    .position(|x| *x == t)
                    .unwrap_or(0);
                &blobs[pos][q * piece..(q + 1) * piece]
            })
            .collect();
        let mut parity = vec![vec![0u8; piece]; s.p];
        codec
            .encode(&data, &mut parity)
            .map_err(|e| (dirs[0].clone(), e.to_string()))?;
        for (j, expected) in parity.iter().enumerate() {
            let key = ParityKey {
                stripe: t as u32,
                index: j as u32,
            };
            let path = dirs[s.parity_holder(t, j)].join(parity_file(key));
            let kept = crate::safefs::read_nofollow(&path, g.piece)
                .map_err(|e| (path.clone(), e.to_string()))?;
            if kept != *expected {
                return Err((
                    path,
                    format!(
                        "parity shard does not match the group's files (stripe {t}, shard {j})"
                    ),
                ));
            }
        }
    }
    Ok(())
}
