//! Projection of recovery times to many nodes from costs measured here
//! (`cargo bench --bench strategies` writes them as JSON).
//!
//! Assumptions, each stated so a reader can disagree with one:
//! - weak scaling: every rank keeps the same checkpoint size, one rank per
//!   node, as in the benchmark;
//! - a collective round (one exchange or agreement) costs in proportion to
//!   log2 of the node count, from its measured cost at the benchmark's
//!   size: the cheapest `frame` identify time (one exchange); the rest of
//!   each `frame` identify is local work that does not grow;
//! - the baseline's identify time is its validation (reading and checking
//!   each level's newest files on every rank, in parallel) plus one round
//!   per level tried; validation is the measured identify time minus its
//!   rounds, and does not grow with the node count, except that of level 4;
//! - fetching is the same code in both strategies: both are given the
//!   mean of the two measured fetch times;
//! - level 4 lives on one shared file system of fixed bandwidth: reading
//!   it (the baseline's validation and both strategies' fetch) grows in
//!   proportion to the node count; fetching from levels 2 and 3 is local
//!   to a node and its partner or group, and does not grow;
//! - loading is local and does not grow;
//! - online runtime recovery grows with log2 of the node count (REINIT
//!   travels a tree), redeploying grows in proportion to it (every process
//!   is started again).

use serde::{Deserialize, Serialize};

/// Medians of one strategy at one failure level, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Identify (planning, validation and rounds).
    pub identify_ms: f64,
    /// Fetch or rebuild.
    pub fetch_ms: f64,
    /// Load into the regions.
    pub load_ms: f64,
    /// Agreement rounds.
    pub rounds: f64,
}

/// What the strategies benchmark measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Nodes the benchmark ran on.
    pub nodes: f64,
    /// `frame` at levels 1 to 4.
    pub frame: [Point; 4],
    /// The iterative baseline at levels 1 to 4.
    pub iterative: [Point; 4],
    /// Runtime recovery, online, milliseconds.
    pub online_ms: f64,
    /// Runtime recovery, redeploying the job, milliseconds.
    pub redeploy_ms: f64,
}

impl Measured {
    /// The medians `cargo bench --bench strategies` measured on the 2-core
    /// test machine (6 nodes of one rank, 3 MiB per rank; docs/PERFORMANCE.md).
    pub fn test_machine() -> Self {
        let p = |identify_ms, fetch_ms, load_ms, rounds| Point {
            identify_ms,
            fetch_ms,
            load_ms,
            rounds,
        };
        Self {
            nodes: 6.0,
            frame: [
                p(3.48, 0.0, 1.96, 1.0),
                p(4.42, 10.47, 15.79, 1.0),
                p(7.75, 48.01, 14.12, 1.0),
                p(13.02, 26.84, 17.04, 1.0),
            ],
            iterative: [
                p(11.34, 0.0, 1.88, 2.0),
                p(18.73, 6.65, 20.46, 3.0),
                p(20.37, 38.61, 15.12, 4.0),
                p(40.09, 15.85, 14.53, 5.0),
            ],
            online_ms: 4.25,
            redeploy_ms: 44.47,
        }
    }
}

/// Projected times at one node count and level, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Projected {
    /// Nodes.
    pub nodes: f64,
    /// Failure level (1 to 4).
    pub level: u8,
    /// `frame` retrieval (identify + fetch).
    pub frame_ms: f64,
    /// Baseline retrieval.
    pub iterative_ms: f64,
    /// Full recovery, online runtime with `frame`.
    pub online_frame_ms: f64,
    /// Full recovery, redeploy with the baseline.
    pub redeploy_iterative_ms: f64,
}

fn log2(n: f64) -> f64 {
    n.max(2.0).log2()
}

/// Projects `m` to `nodes` nodes.
pub fn project(m: &Measured, nodes: f64) -> [Projected; 4] {
    let rounds = log2(nodes) / log2(m.nodes);
    let linear = nodes / m.nodes.max(1.0);
    std::array::from_fn(|i| {
        let (f, b) = (m.frame[i], m.iterative[i]);
        // One round costs at most the cheapest `frame` identify (one
        // exchange); the rest of a `frame` identify is local work (reading
        // commit markers, planning) that does not grow.
        let round = m
            .frame
            .iter()
            .map(|p| p.identify_ms)
            .fold(f64::INFINITY, f64::min);
        let frame_local = (f.identify_ms - round).max(0.0);
        let l4 = i == 3;
        // Fetching is the same code in both strategies: both use the mean
        // of the two measurements.
        let measured_fetch = (f.fetch_ms + b.fetch_ms) / 2.0;
        let fetch = if l4 {
            measured_fetch * linear
        } else {
            measured_fetch
        };
        // The baseline's level-4 validation reads the files its fetch
        // reads again: that part grows with the file system's load.
        let validation = (b.identify_ms - b.rounds * round).max(0.0);
        let (local, shared) = if l4 {
            let shared = validation.min(measured_fetch);
            (validation - shared, shared)
        } else {
            (validation, 0.0)
        };
        let frame_ms = frame_local + round * rounds + fetch;
        let iterative_ms = local + shared * linear + b.rounds * round * rounds + fetch;
        Projected {
            nodes,
            level: i as u8 + 1,
            frame_ms,
            iterative_ms,
            online_frame_ms: m.online_ms * rounds + frame_ms + f.load_ms,
            redeploy_iterative_ms: m.redeploy_ms * linear + iterative_ms + b.load_ms,
        }
    })
}

/// The projection for 16 to 1024 nodes, as a table.
pub fn table(m: &Measured) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>5} | {:>10} {:>10} {:>6} | {:>14} {:>16} {:>7}",
        "nodes",
        "level",
        "frame",
        "iterative",
        "ratio",
        "online+frame",
        "redeploy+iter.",
        "speedup"
    );
    let mut n = 16.0;
    while n <= 1024.0 {
        for p in project(m, n) {
            let _ = writeln!(
                out,
                "{:>6} {:>5} | {:>10.1} {:>10.1} {:>5.2}x | {:>14.1} {:>16.1} {:>6.1}x",
                p.nodes,
                format!("L{}", p.level),
                p.frame_ms,
                p.iterative_ms,
                p.frame_ms / p.iterative_ms,
                p.online_frame_ms,
                p.redeploy_iterative_ms,
                p.redeploy_iterative_ms / p.online_frame_ms
            );
        }
        n *= 2.0;
    }
    let _ = writeln!(
        out,
        "(milliseconds; retrieval = identify + fetch; full = runtime + retrieval + load; measured at {} nodes)",
        m.nodes
    );
    out
}

#[cfg(test)]
mod tests;
