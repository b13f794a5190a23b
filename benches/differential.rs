//! Differential level 4 against full level-4 writes, on a rank whose data
//! changes by 10 % per checkpoint interval, measured side by side in the
//! same run:
//!
//! - **scattered**: 10 % of the 64 KiB blocks, chosen at random in every
//!   interval (a solver updating parts of its domain);
//! - **contiguous**: one span of 10 % of the data, at a different place in
//!   every interval (a moving front);
//! - **fine**: 10 % of the data as 4 KiB pieces scattered at random, which
//!   touches about a third of the 64 KiB blocks: what the block size costs.
//!
//! For each, a base checkpoint and then four intervals in a row, each
//! written differentially (`L4Write::Differential`, 64 KiB blocks, also
//! 4 MiB blocks for the scattered case) and fully (`L4Write::Full`,
//! 16 MiB chunks, frame's non-differential level 4) into the global
//! directory; bytes written and time (medians over the intervals of five
//! repetitions), and every differential checkpoint read back, each block
//! checked against its hash (`src/level/global/tests.rs` compares them
//! with the data, bit for bit).
//!
//! Run: `cargo bench --bench differential`. `FRAME_BENCH_MIB` sets the
//! data per rank (default 256), `FRAME_BENCH_DIR` the directory (default
//! `/dev/shm`).

mod support;

use frame::internals::format::{Compression, Metadata, VERSION};
use frame::internals::level::{GlobalStore, L4Write, Pieces};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{bench_dir, median, mib};

/// Blocks of the differential writes.
const BLOCK: usize = 64 << 10;
/// Chunks of the full writes (frame's default `l4.chunk_size`).
const CHUNK: usize = 16 << 20;
/// Checkpoint intervals after the base one.
const INTERVALS: u64 = 4;
const REPEATS: usize = 5;

/// How the data changes in an interval.
#[derive(Clone, Copy)]
enum Change {
    /// 10 % of the `BLOCK`-sized blocks, at random.
    Scattered,
    /// One span of 10 %.
    Contiguous,
    /// 10 % as 4 KiB pieces at random.
    Fine,
}

/// A small generator of positions, the same in every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Changes 10 % of `bytes` the way `change` says.
fn apply(change: Change, bytes: &mut [u8], rng: &mut Rng, interval: u64) {
    let len = bytes.len();
    let mut touch = |at: usize, n: usize| {
        for b in &mut bytes[at..(at + n).min(len)] {
            *b = b.wrapping_add(1 + interval as u8);
        }
    };
    match change {
        Change::Scattered | Change::Fine => {
            let piece = if matches!(change, Change::Fine) {
                4096
            } else {
                BLOCK
            };
            let pieces = len / piece;
            for _ in 0..pieces / 10 {
                touch(rng.below(pieces) * piece, piece);
            }
        }
        Change::Contiguous => {
            let span = len / 10;
            touch(rng.below(len - span), span);
        }
    }
}

fn record(id: u64, len: u64) -> Metadata {
    Metadata {
        format_version: VERSION,
        job_id: "diff".into(),
        checkpoint_id: id,
        level: 1,
        rank: 0,
        world_size: 1,
        node: 0,
        stamp: id,
        file: "rank-000000.fck".into(),
        file_len: len,
        header_crc: 0,
        data_crc: 0,
        raw_bytes: len,
        stored_bytes: len,
        compression: Compression::None,
        regions: Vec::new(),
        created_unix_ms: 0,
    }
}

/// The level-1 file a promotion reads, holding `bytes`.
fn pieces(source: &Path, bytes: &[u8]) -> Pieces {
    std::fs::write(source, bytes).expect("source");
    let file = std::fs::File::open(source).expect("source");
    Pieces::new(file, source.to_path_buf(), bytes.len() as u64)
}

/// One row: per interval, bytes a differential write with `block` wrote
/// and the medians of its time and of a full write's.
fn run(base: &Path, per_rank: usize, change: Change, block: usize) -> (u64, Duration, Duration) {
    let source = base.join("source.bin");
    let how = L4Write::Differential {
        block,
        full_every: 8,
    };
    let (mut diff, mut full, mut written) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..REPEATS {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ rep as u64);
        // Data with no two blocks alike, as a solver's fields are.
        let mut bytes: Vec<u8> = (0..per_rank).map(|_| rng.below(256) as u8).collect();
        let dir = base.join(format!("rep-{rep}"));
        let store = GlobalStore::open(&dir.join("diff"), "diff", 0).expect("store");
        let plain = GlobalStore::open(&dir.join("full"), "full", 0).expect("store");
        store
            .write_from(
                &record(1, per_rank as u64),
                pieces(&source, &bytes),
                how,
                None,
            )
            .expect("base");
        for id in 2..2 + INTERVALS {
            apply(change, &mut bytes, &mut rng, id);
            let file = pieces(&source, &bytes);
            let t = Instant::now();
            let w = store
                .write_from(&record(id, per_rank as u64), file, how, None)
                .expect("differential");
            diff.push(t.elapsed());
            written.push(w.written);
            let file = pieces(&source, &bytes);
            let t = Instant::now();
            plain
                .write_from(
                    &record(id, per_rank as u64),
                    file,
                    L4Write::Full { chunk: CHUNK },
                    None,
                )
                .expect("full");
            full.push(t.elapsed());
            // Every block the checkpoint names is where it says, with its hash.
            store.verify(id, 0, 1).expect("read back");
            // Only the last interval's full write is kept.
            plain.retain(&[0], 1, 1, true, false).ok();
        }
        std::fs::remove_dir_all(&dir).expect("clean");
    }
    written.sort_unstable();
    (written[written.len() / 2], median(diff), median(full))
}

fn main() {
    let per_rank = mib(256) << 20;
    let base = bench_dir("differential");
    println!(
        "differential level 4, {} MiB per rank, 10% of the data changed per interval \
         (medians of {} intervals x {REPEATS}):",
        per_rank >> 20,
        INTERVALS
    );
    let rows = [
        ("scattered 64 KiB blocks", Change::Scattered, BLOCK),
        ("scattered, 4 MiB blocks", Change::Scattered, 4 << 20),
        ("one contiguous span", Change::Contiguous, BLOCK),
        ("scattered 4 KiB pieces", Change::Fine, BLOCK),
    ];
    for (what, change, block) in rows {
        let (written, diff, full) = run(base.path(), per_rank, change, block);
        println!(
            "  {what:<26} wrote {:>6.1} of {} MiB ({:>3.0}%) in {:>7.1} ms; full write {:>7.1} ms -> {:.2}x the time, {:.2}x the bytes",
            written as f64 / (1 << 20) as f64,
            per_rank >> 20,
            written as f64 * 100.0 / per_rank as f64,
            diff.as_secs_f64() * 1e3,
            full.as_secs_f64() * 1e3,
            diff.as_secs_f64() / full.as_secs_f64(),
            written as f64 / per_rank as f64
        );
    }
}
