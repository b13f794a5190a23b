//! Projection of the runtime's recovery past the measuring machine, from
//! the phases `cargo bench --bench scale` measured at 16 to 1024 ranks
//! (it writes them to `target/scale.json`).
//!
//! On the machine that measures, every process of the job shares a few
//! cores, so a recovery's wall time there is mostly CPU: the benchmark
//! finds it within a few percent of the bound the cores set. On a cluster
//! every rank has a core. The projection prices a recovery there as:
//! - the root's CPU, spent in one process: r(N) = a + b N, fitted (least
//!   squares, no negative terms) to the measured root CPU per size;
//! - one rank's CPU, every rank working in parallel: c(N) = a + b N,
//!   fitted to the measured CPU of all ranks divided by the ranks. The
//!   term in N is work each rank does once per rank of the job (the
//!   placement it is given, for instance). The measurement includes what
//!   sharing cores costs (switching between a thousand processes), so this
//!   is an upper bound;
//! - the protocol's critical path: the root's REINIT to the ranks through
//!   the daemons (2 hops), their readiness back (2), the release (2), and
//!   the collectives of the checkpointer's way back, each a reduction up
//!   and a broadcast down a binomial tree (2 ceil(log2 N) hops each), every
//!   hop at the target network's latency.
//!
//! Paper 000 (Reinit++) measured MPI recovery (fault propagation, the
//! survivors' re-initialisation and the failed process's respawn; no
//! checkpoint reading) at 16 to 1024 ranks, 16 per node: about 0.5 s for
//! a process failure and 1.5 s for a node, nearly flat; ULFM on par up to
//! 64 ranks, then up to three times slower at 1024; relaunching the job
//! about 3 s. Those figures are given where the paper measured them; the
//! projection here is of frame's whole recovery (through the last rank's
//! load), which includes more.

use serde::{Deserialize, Serialize};

/// The failure a measurement or projection is of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One rank's process killed (its node lives on).
    #[default]
    Rank,
    /// A node killed: its ranks restart on a spare from level 2.
    Node,
}

impl Kind {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Rank => "rank",
            Kind::Node => "node",
        }
    }
}

/// A recovery's phases (see `frame report`), milliseconds: the slowest
/// rank's for the last four.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// The root's decision (detection to REINIT sent).
    pub decide: f64,
    /// Until the last rank is ready.
    pub unwind: f64,
    /// The root's release of the world barrier.
    pub release: f64,
    /// Until the release reached the last rank.
    pub deliver: f64,
    /// The slowest rank's way back to the checkpointer.
    pub reentry: f64,
    /// Its search for the checkpoint.
    pub identify: f64,
    /// Its fetch from a higher level.
    pub fetch: f64,
    /// Its load.
    pub load: f64,
}

impl Phases {
    /// Each phase with its name, in order.
    pub fn named(&self) -> [(&'static str, f64); 8] {
        [
            ("decide", self.decide),
            ("unwind", self.unwind),
            ("release", self.release),
            ("deliver", self.deliver),
            ("reentry", self.reentry),
            ("identify", self.identify),
            ("fetch", self.fetch),
            ("load", self.load),
        ]
    }
}

/// One failure at one job size: medians of the benchmark's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Size {
    /// Ranks of the job.
    pub ranks: f64,
    /// The failure.
    pub kind: Kind,
    /// The runtime's part: detection to the release, milliseconds.
    pub runtime_ms: f64,
    /// Detection to the end of the last rank's load, milliseconds.
    pub total_ms: f64,
    /// The root's CPU in the recovery, milliseconds.
    pub root_cpu_ms: f64,
    /// All ranks' CPU in the recovery, milliseconds.
    pub ranks_cpu_ms: f64,
    /// Messages the root read.
    pub root_messages: f64,
    /// The phases.
    pub phases: Phases,
}

/// What the scale benchmark measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Cores of the measuring machine.
    pub cores: f64,
    /// Ranks per (virtual) node.
    pub ranks_per_node: f64,
    /// Every size and failure measured.
    pub sizes: Vec<Size>,
}

impl Measured {
    /// The medians the benchmark measured on the 2-core test machine
    /// (docs/PERFORMANCE.md, "As the job grows").
    pub fn test_machine() -> Self {
        let size = |ranks, kind, t: [f64; 5], p: [f64; 8]| Size {
            ranks,
            kind,
            runtime_ms: t[0],
            total_ms: t[1],
            root_cpu_ms: t[2],
            ranks_cpu_ms: t[3],
            root_messages: t[4],
            phases: Phases {
                decide: p[0],
                unwind: p[1],
                release: p[2],
                deliver: p[3],
                reentry: p[4],
                identify: p[5],
                fetch: p[6],
                load: p[7],
            },
        };
        Self {
            cores: 2.0,
            ranks_per_node: 16.0,
            sizes: TEST_MACHINE
                .iter()
                .map(|(r, k, t, p)| size(*r, *k, *t, *p))
                .collect(),
        }
    }

    /// The measurements of one failure, smallest job first.
    pub fn of(&self, kind: Kind) -> Vec<Size> {
        let mut v: Vec<Size> = self
            .sizes
            .iter()
            .filter(|s| s.kind == kind)
            .copied()
            .collect();
        v.sort_by(|a, b| a.ranks.total_cmp(&b.ranks));
        v
    }
}

/// The test machine's medians (three runs each): ranks, failure,
/// (runtime, total, root CPU, ranks' CPU, root messages), (phases).
#[allow(clippy::type_complexity)]
const TEST_MACHINE: &[(f64, Kind, [f64; 5], [f64; 8])] = &[
    (
        16.0,
        Kind::Rank,
        [0.47, 16.39, 0.13, 23.31, 2.00],
        [0.11, 0.36, 0.01, 2.86, 7.33, 2.95, 0.00, 5.51],
    ),
    (
        64.0,
        Kind::Rank,
        [0.81, 76.22, 0.16, 110.70, 2.00],
        [0.17, 0.59, 0.03, 17.22, 52.11, 17.55, 0.00, 17.71],
    ),
    (
        64.0,
        Kind::Node,
        [3.95, 164.01, 2.29, 211.55, 32.00],
        [0.13, 3.79, 0.03, 30.93, 83.90, 9.19, 51.30, 29.14],
    ),
    (
        256.0,
        Kind::Rank,
        [4.48, 334.54, 0.46, 523.80, 2.00],
        [0.17, 3.08, 0.59, 80.21, 229.47, 72.24, 0.00, 84.39],
    ),
    (
        256.0,
        Kind::Node,
        [6.86, 583.97, 2.32, 870.72, 32.00],
        [0.47, 5.43, 0.12, 122.45, 379.26, 27.77, 148.71, 148.92],
    ),
    (
        1024.0,
        Kind::Rank,
        [32.06, 1740.22, 1.63, 2805.34, 3.00],
        [0.62, 13.99, 2.97, 456.97, 1188.48, 328.28, 0.00, 438.56],
    ),
    (
        1024.0,
        Kind::Node,
        [22.28, 2282.79, 4.04, 3661.05, 53.00],
        [0.24, 21.58, 0.69, 409.70, 1552.42, 80.74, 676.12, 617.74],
    ),
];

/// The collectives on a rank's way back through the checkpointer after a
/// recovery (counted in the code): the storage set-up's agreement, the
/// placement's all-gather, the managers' agreement and their addresses'
/// all-gather, the moved level-1 files' gather and answer, the
/// failure-aware reports' gather and decision, the restore's exchange and
/// its agreement.
pub const COLLECTIVES: f64 = 8.0;

/// Least squares fit y = a + b x with neither term negative.
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.is_empty() {
        return (0.0, 0.0);
    }
    let mean = |f: fn(&(f64, f64)) -> f64| points.iter().map(f).sum::<f64>() / n;
    let (mx, my) = (mean(|p| p.0), mean(|p| p.1));
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let a = my - b * mx;
    if a >= 0.0 {
        (a, b)
    } else {
        // Through the origin instead.
        let sxx0: f64 = points.iter().map(|p| p.0 * p.0).sum();
        let sxy0: f64 = points.iter().map(|p| p.0 * p.1).sum();
        (
            0.0,
            if sxx0 > 0.0 {
                (sxy0 / sxx0).max(0.0)
            } else {
                0.0
            },
        )
    }
}

/// A machine to project to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Target {
    /// Nodes.
    pub nodes: f64,
    /// Ranks per node.
    pub ranks_per_node: f64,
}

impl Target {
    /// Ranks of the job.
    pub fn ranks(&self) -> f64 {
        self.nodes * self.ranks_per_node
    }
}

/// The sizes projected: paper 000's (16 ranks per node, up to 64 nodes),
/// 1024 nodes of 16, and paper 004's largest (32768 processes).
pub const TARGETS: [Target; 6] = [
    Target {
        nodes: 1.0,
        ranks_per_node: 16.0,
    },
    Target {
        nodes: 4.0,
        ranks_per_node: 16.0,
    },
    Target {
        nodes: 16.0,
        ranks_per_node: 16.0,
    },
    Target {
        nodes: 64.0,
        ranks_per_node: 16.0,
    },
    Target {
        nodes: 1024.0,
        ranks_per_node: 16.0,
    },
    Target {
        nodes: 1024.0,
        ranks_per_node: 32.0,
    },
];

/// A projected recovery, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Projected {
    /// Where.
    pub target: Target,
    /// The failure.
    pub kind: Kind,
    /// The root's CPU.
    pub root_ms: f64,
    /// One rank's CPU.
    pub rank_ms: f64,
    /// Message hops on the critical path.
    pub hops: f64,
    /// Their time at the latency given.
    pub path_ms: f64,
    /// The whole recovery.
    pub total_ms: f64,
}

/// Hops on the recovery's critical path at `ranks` ranks.
pub fn hops(ranks: f64) -> f64 {
    6.0 + COLLECTIVES * 2.0 * ranks.max(2.0).log2().ceil()
}

/// Projects `kind`'s recovery from `m` to `target`, each hop taking
/// `latency_ms`; `None` without measurements of that failure.
pub fn project(m: &Measured, kind: Kind, target: Target, latency_ms: f64) -> Option<Projected> {
    let sizes = m.of(kind);
    if sizes.is_empty() {
        return None;
    }
    let root: Vec<(f64, f64)> = sizes.iter().map(|s| (s.ranks, s.root_cpu_ms)).collect();
    let rank: Vec<(f64, f64)> = (sizes.iter())
        .filter(|s| s.ranks > 0.0)
        .map(|s| (s.ranks, s.ranks_cpu_ms / s.ranks))
        .collect();
    let n = target.ranks();
    let (ra, rb) = fit(&root);
    let (ca, cb) = fit(&rank);
    let (root_ms, rank_ms) = (ra + rb * n, ca + cb * n);
    let hops = hops(n);
    let path_ms = hops * latency_ms;
    Some(Projected {
        target,
        kind,
        root_ms,
        rank_ms,
        hops,
        path_ms,
        total_ms: root_ms + rank_ms + path_ms,
    })
}

/// Paper 000's MPI recovery at `ranks` ranks (16 per node), seconds:
/// (Reinit++, ULFM, relaunch), where it measured (16 to 1024 ranks).
/// Read from its text: Reinit++ about 0.5 s for a process and 1.5 s for
/// a node, flat; ULFM on par with Reinit++ up to 64 ranks, then up to 3x
/// at 1024 (taken as growing linearly in log2 of the ranks between), and
/// no node figure (it hung or crashed); relaunching about 3 s.
pub fn paper000(kind: Kind, ranks: f64) -> Option<(f64, Option<f64>, f64)> {
    if !(16.0..=1024.0).contains(&ranks) {
        return None;
    }
    Some(match kind {
        Kind::Rank => {
            let ulfm = if ranks <= 64.0 {
                0.5
            } else {
                0.5 + 1.0 * (ranks.log2() - 6.0) / 4.0
            };
            (0.5, Some(ulfm), 3.0)
        }
        Kind::Node => (1.5, None, 3.0),
    })
}

/// How each phase grew between the two largest sizes measured: (name,
/// milliseconds at each size, exponent k of W ~ N^k).
pub fn growth(m: &Measured, kind: Kind) -> Vec<(&'static str, Vec<f64>, Option<f64>)> {
    let sizes = m.of(kind);
    let names = Phases::default().named().map(|(n, _)| n);
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ms: Vec<f64> = sizes.iter().map(|s| s.phases.named()[i].1).collect();
            let k = match sizes.len() {
                0 | 1 => None,
                l => {
                    let (a, b) = (&sizes[l - 2], &sizes[l - 1]);
                    let (wa, wb) = (ms[l - 2], ms[l - 1]);
                    (wa > 0.0 && wb > 0.0 && b.ranks > a.ranks)
                        .then(|| (wb / wa).ln() / (b.ranks / a.ranks).ln())
                }
            };
            (*name, ms, k)
        })
        .collect()
}

/// The projection and the phases' growth, as tables.
pub fn table(m: &Measured, latency_ms: f64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for kind in [Kind::Rank, Kind::Node] {
        let sizes = m.of(kind);
        if sizes.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "a {} killed: phases measured on {} cores (milliseconds; growth k of W ~ N^k over the two largest sizes)",
            kind.name(),
            m.cores
        );
        let _ = write!(out, "{:>9}", "phase");
        for s in &sizes {
            let _ = write!(out, " {:>9}", format!("{}", s.ranks));
        }
        let _ = writeln!(out, " {:>6}", "k");
        for (name, ms, k) in growth(m, kind) {
            let _ = write!(out, "{name:>9}");
            for v in ms {
                let _ = write!(out, " {v:>9.1}");
            }
            let _ = writeln!(out, " {:>6}", k.map_or("-".into(), |k| format!("{k:.2}")));
        }
        let _ = writeln!(
            out,
            "projected with a core per rank, {:.0} us per hop (milliseconds; paper 000's MPI recovery in seconds where it measured):",
            latency_ms * 1000.0
        );
        let _ = writeln!(
            out,
            "{:>6} {:>6} | {:>8} {:>8} {:>5} {:>8} {:>9} | {:>8} {:>6} {:>8}",
            "nodes",
            "ranks",
            "root",
            "a rank",
            "hops",
            "path",
            "recovery",
            "Reinit++",
            "ULFM",
            "relaunch"
        );
        for target in TARGETS {
            let Some(p) = project(m, kind, target, latency_ms) else {
                continue;
            };
            let paper = paper000(kind, target.ranks());
            let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
            let _ = writeln!(
                out,
                "{:>6} {:>6} | {:>8.2} {:>8.2} {:>5.0} {:>8.2} {:>9.1} | {:>8} {:>6} {:>8}",
                target.nodes,
                target.ranks(),
                p.root_ms,
                p.rank_ms,
                p.hops,
                p.path_ms,
                p.total_ms,
                cell(paper.map(|p| p.0)),
                cell(paper.and_then(|p| p.1)),
                cell(paper.map(|p| p.2)),
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
