//! `frame inspect DIR`

use anyhow::Context;
use bytesize::ByteSize;
use frame::internals::level::catalog::{self, CheckpointDir, LevelDir};
use frame::region::RegionInfo;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

pub fn run(dir: &Path, ranks: bool, json: bool) -> anyhow::Result<ExitCode> {
    let levels = catalog::scan(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .levels;
    if json {
        println!("{}", serde_json::to_string_pretty(&levels)?);
        return Ok(ExitCode::SUCCESS);
    }
    if levels.is_empty() {
        println!("no checkpoints under {}", dir.display());
    }
    for level in &levels {
        print_level(level, ranks);
    }
    print_committed(&levels);
    Ok(ExitCode::SUCCESS)
}

/// Per job, the levels at which each checkpoint is committed: level 1 when
/// every rank's record is there, levels 2 to 4 when a commit marker is.
fn print_committed(levels: &[LevelDir]) {
    // job -> id -> levels
    let mut table: BTreeMap<String, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
    let mut l1: BTreeMap<(String, u64), (u32, std::collections::BTreeSet<u32>)> = BTreeMap::new();
    for dir in levels {
        let (Some(job), Some(level)) = (dir.job.clone(), dir.level) else {
            continue;
        };
        for c in &dir.checkpoints {
            if level == 1 {
                let e = l1.entry((job.clone(), c.id)).or_default();
                for r in &c.ranks {
                    if let Some(m) = &r.record {
                        e.0 = e.0.max(m.world_size);
                        e.1.insert(r.rank);
                    }
                }
            } else if c.committed {
                table
                    .entry(job.clone())
                    .or_default()
                    .entry(c.id)
                    .or_default()
                    .push(level);
            }
        }
    }
    for ((job, id), (world, ranks)) in l1 {
        if world > 0 && ranks.len() == world as usize {
            table.entry(job).or_default().entry(id).or_default().push(1);
        }
    }
    for (job, ids) in table {
        println!("job {job}: committed levels per checkpoint");
        for (id, mut lv) in ids {
            lv.sort_unstable();
            lv.dedup();
            let names: Vec<String> = lv.iter().map(|l| format!("L{l}")).collect();
            println!("  checkpoint {id}: {}", names.join(" "));
        }
    }
}

fn print_level(level: &LevelDir, ranks: bool) {
    let first = level
        .checkpoints
        .iter()
        .flat_map(|c| &c.ranks)
        .find_map(|r| r.record.as_ref());
    let job = first.map_or("?".to_string(), |m| m.job_id.clone());
    let lvl = first.map_or("?".to_string(), |m| format!("L{}", m.level));
    let latest = level.latest.map_or("none".to_string(), |l| l.to_string());
    println!("{}", level.path.display());
    println!("  job {job}, level {lvl}, latest committed checkpoint: {latest}");
    for ckpt in &level.checkpoints {
        print_checkpoint(ckpt, level.latest, level.level, ranks);
    }
}

fn print_checkpoint(ckpt: &CheckpointDir, latest: Option<u64>, level: Option<u8>, ranks: bool) {
    let records: Vec<_> = ckpt
        .ranks
        .iter()
        .filter_map(|r| r.record.as_ref())
        .collect();
    let world = records.first().map_or(0, |m| m.world_size);
    let raw: u64 = records.iter().map(|m| m.raw_bytes).sum();
    let stored: u64 = records.iter().map(|m| m.stored_bytes).sum();
    let created = records.iter().map(|m| m.created_unix_ms).max().unwrap_or(0);
    let when = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(created));
    let ratio = if stored > 0 {
        raw as f64 / stored as f64
    } else {
        1.0
    };
    let compression = records
        .first()
        .map_or("?".to_string(), |m| m.compression.to_string());
    let state = match level {
        Some(1) | None if latest.is_some_and(|l| ckpt.id > l) => "  (not committed)".to_string(),
        Some(1) | None => String::new(),
        Some(_) if ckpt.committed => match &ckpt.rule {
            Some(rule) => format!("  (committed, {rule})"),
            None => "  (committed)".to_string(),
        },
        Some(_) => "  (not committed)".to_string(),
    };
    let state = if ckpt.parity.is_empty() {
        state
    } else {
        format!("{state}, {} parity shard(s) kept here", ckpt.parity.len())
    };
    println!(
        "  checkpoint {}: {} of {world} rank record(s), created {when}, data {}, stored {}, compression {compression} (ratio {ratio:.2}){state}",
        ckpt.id,
        records.len(),
        ByteSize(raw),
        ByteSize(stored),
    );
    let mut regions: BTreeMap<u32, Vec<RegionInfo>> = BTreeMap::new();
    for m in &records {
        for r in &m.regions {
            regions.entry(r.id).or_default().push(*r);
        }
    }
    for (id, parts) in &regions {
        let total: u64 = parts.iter().map(|r| r.count).sum();
        let bytes: u64 = parts.iter().map(|r| r.bytes()).sum();
        let (lo, hi) = parts.iter().fold((u64::MAX, 0), |(lo, hi), r| {
            (lo.min(r.count), hi.max(r.count))
        });
        let per_rank = if lo == hi {
            format!("{lo} per rank")
        } else {
            format!("{lo} to {hi} per rank")
        };
        let what = if *id == frame::internals::recovery::MESSAGE_COUNTS_REGION {
            " (frame's message counts, for localised recovery)"
        } else {
            ""
        };
        println!(
            "    region {id}{what}: {} x {total} ({per_rank}), {}",
            parts[0].elem,
            ByteSize(bytes)
        );
    }
    if ranks {
        for r in &ckpt.ranks {
            match (&r.record, &r.record_error) {
                (Some(m), _) => {
                    println!(
                    "    rank {}: node {}, {} ({} stored), header crc {:#010x}, data crc {:#010x}",
                    r.rank, m.node, m.file, ByteSize(m.stored_bytes), m.header_crc, m.data_crc
                )
                }
                (None, Some(e)) => println!("    rank {}: unreadable record: {e}", r.rank),
                (None, None) => println!("    rank {}: data file without record", r.rank),
            }
        }
    }
}
