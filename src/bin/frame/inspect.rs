//! `frame inspect DIR`

use anyhow::Context;
use bytesize::ByteSize;
use frame::level::catalog::{self, CheckpointDir, LevelDir};
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
    Ok(ExitCode::SUCCESS)
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
        print_checkpoint(ckpt, level.latest, ranks);
    }
}

fn print_checkpoint(ckpt: &CheckpointDir, latest: Option<u64>, ranks: bool) {
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
    let state = if latest.is_some_and(|l| ckpt.id > l) {
        "  (not committed)"
    } else {
        ""
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
        println!(
            "    region {id}: {} x {total} ({per_rank}), {}",
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
