//! The simulated runs of *Energy-efficient localised rollback after
//! failures via data flow analysis* (its section 5.2): a stencil with one
//! rank per node, 100 to 1000 nodes (weak scaling), node MTBF 100 hours,
//! 1000 iterations in 2.7 hours, a checkpoint every 6 iterations, 10 seeds,
//! under three recoveries side by side:
//! - **global**: every rank rolls back to the checkpoint and recomputes
//!   the lost iterations;
//! - **cone** (the paper's data-flow rollback, frame's `cone` mode): only
//!   the ranks of the failure's dependency cone recompute, each as far as
//!   the cone says ([`frame::internals::recovery::Cone`]); the others idle;
//! - **logged** (sender-based logs, frame's `logged` mode with one spare):
//!   the replacement alone recomputes, fed from the survivors' logs.
//!
//! As the paper does: failures never strike during a recovery or together,
//! detection and the replacement's start cost nothing, and every recovery
//! lasts as long as the replacement's recomputation (the lost iterations),
//! so the three take the same time. The paper leaves the checkpoint's cost
//! out of its figures; so does this. Energy: a node draws 125 J/s while it
//! computes and 110 J/s while it idles at the lowest frequency (the
//! paper's measurements), so every idle node-second saves 15 J.
//!
//! The paper's equations 3 to 7 were lost from the text this reproduction
//! was made from; the cone here is derived from its figure 7 and its text
//! (each lost iteration widens the cone by one neighbour on every side),
//! which gives g^2 rank-iterations for a one-dimensional stencil losing g
//! iterations and 2g(g+1)+1 ranks involved in two dimensions.

use frame::internals::recovery::{chain, grid, Cone};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// How the failed rank's lost iterations are recomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rollback {
    /// Every rank rolls back.
    Global,
    /// The failure's dependency cone recomputes.
    Cone,
    /// The replacement recomputes alone from the survivors' logs.
    Logged,
}

/// The stencil's shape: whose data each rank reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stencil {
    /// A chain: 3-point stencil (the paper's simulation).
    OneD,
    /// The squarest grid of the node count: 5-point stencil.
    TwoD,
}

/// The simulated job.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// Nodes, one rank each.
    pub nodes: usize,
    /// Mean time between failures of one node, seconds.
    pub node_mtbf_s: f64,
    /// Iterations of the job.
    pub iterations: u32,
    /// Seconds per iteration.
    pub iteration_s: f64,
    /// A checkpoint after every this many iterations.
    pub interval: u32,
    /// Power of a computing node, watts.
    pub active_w: f64,
    /// Power of an idle node at its lowest frequency, watts.
    pub idle_w: f64,
    /// Whose data each rank reads.
    pub stencil: Stencil,
}

impl Setup {
    /// The paper's job at `nodes` nodes.
    pub fn paper(nodes: usize, stencil: Stencil) -> Self {
        Self {
            nodes,
            node_mtbf_s: 100.0 * 3600.0,
            iterations: 1000,
            iteration_s: 2.7 * 3600.0 / 1000.0,
            interval: 6,
            active_w: 125.0,
            idle_w: 110.0,
            stencil,
        }
    }

    fn neighbours(&self) -> Vec<Vec<usize>> {
        match self.stencil {
            Stencil::OneD => chain(self.nodes),
            Stencil::TwoD => {
                let rows = (1..=self.nodes)
                    .rev()
                    .find(|r| self.nodes % r == 0 && r * r <= self.nodes)
                    .unwrap_or(1);
                grid(rows, self.nodes / rows)
            }
        }
    }
}

/// One run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// Failures.
    pub crashes: u32,
    /// Iterations recomputed, summed over ranks.
    pub recomputed: u64,
    /// Node-seconds spent idle during recoveries.
    pub idle_node_s: f64,
    /// Energy of the whole run, joules.
    pub energy_j: f64,
    /// Wall-clock time of the run, seconds.
    pub runtime_s: f64,
}

/// Run `seed` of `setup` under `rollback`. The failures depend only on the
/// setup and the seed, so the three rollbacks meet the same ones.
pub fn run(setup: &Setup, rollback: Rollback, seed: u64) -> Outcome {
    let neighbours = setup.neighbours();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(setup.nodes as u64);
    let rate = setup.nodes as f64 / setup.node_mtbf_s;
    let draw = |rng: &mut ChaCha8Rng| -(1.0 - rng.random::<f64>()).ln() / rate;
    let (mut t, mut done, mut checkpointed) = (0.0f64, 0u32, 0u32);
    let mut next_failure = draw(&mut rng);
    let mut out = Outcome::default();
    let it = setup.iteration_s;
    while done < setup.iterations {
        if next_failure >= t + it {
            t += it;
            done += 1;
            if done % setup.interval.max(1) == 0 {
                checkpointed = done;
            }
            continue;
        }
        // A node fails during the next iteration: what it computed so far
        // is lost everywhere, then the lost iterations are recomputed.
        out.crashes += 1;
        let failed = rng.random_range(0..setup.nodes.max(1));
        let gap = done - checkpointed;
        let all = setup.nodes as u64 * u64::from(gap);
        let recomputed = match rollback {
            Rollback::Global => all,
            Rollback::Cone => Cone::new(&neighbours, &[failed], gap)
                .map(|c| c.recomputed())
                .unwrap_or(all),
            Rollback::Logged => u64::from(gap),
        };
        out.recomputed += recomputed;
        out.idle_node_s += (all - recomputed) as f64 * it;
        t = next_failure + f64::from(gap) * it;
        next_failure = t + draw(&mut rng);
    }
    out.runtime_s = t;
    out.energy_j =
        setup.active_w * setup.nodes as f64 * t - (setup.active_w - setup.idle_w) * out.idle_node_s;
    out
}

/// One node count of the reproduction: means over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Nodes.
    pub nodes: usize,
    /// The stencil.
    pub stencil: Stencil,
    /// Mean failures per run.
    pub crashes: f64,
    /// Mean rank-iterations recomputed per run: global, cone, logged.
    pub recomputed: [f64; 3],
    /// Mean idle node-seconds per run: global, cone, logged.
    pub idle_node_s: [f64; 3],
    /// Mean energy saved against global rollback, joules: cone, logged.
    pub saved_j: [f64; 2],
    /// Mean run time, seconds: global, cone, logged.
    pub runtime_s: [f64; 3],
}

impl Row {
    /// Rank-iterations recomputed per failure: global, cone, logged.
    pub fn recomputed_per_crash(&self) -> [f64; 3] {
        self.recomputed.map(|r| r / self.crashes.max(1e-9))
    }
}

/// The node counts of the paper's figure, and 1024.
pub const NODES: [usize; 11] = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1024];

/// The reproduction: every node count of [`NODES`], `seeds` seeds each.
pub fn reproduce(stencil: Stencil, seeds: u64) -> Vec<Row> {
    NODES
        .iter()
        .map(|&n| {
            let setup = Setup::paper(n, stencil);
            let mean = |rollback| {
                let runs: Vec<Outcome> = (0..seeds).map(|s| run(&setup, rollback, s)).collect();
                let k = seeds.max(1) as f64;
                let avg = |f: &dyn Fn(&Outcome) -> f64| runs.iter().map(f).sum::<f64>() / k;
                (
                    avg(&|o| f64::from(o.crashes)),
                    avg(&|o| o.recomputed as f64),
                    avg(&|o| o.idle_node_s),
                    avg(&|o| o.energy_j),
                    avg(&|o| o.runtime_s),
                )
            };
            let (g, c, l) = (
                mean(Rollback::Global),
                mean(Rollback::Cone),
                mean(Rollback::Logged),
            );
            Row {
                nodes: n,
                stencil,
                crashes: g.0,
                recomputed: [g.1, c.1, l.1],
                idle_node_s: [g.2, c.2, l.2],
                saved_j: [g.3 - c.3, g.3 - l.3],
                runtime_s: [g.4, c.4, l.4],
            }
        })
        .collect()
}

/// The coefficient `a` of the least-squares fit `saved = a N^2` of the
/// cone's savings over the paper's node counts (100 to 1000).
pub fn quadratic_fit(rows: &[Row]) -> f64 {
    let (num, den) = rows
        .iter()
        .filter(|r| r.nodes <= 1000)
        .fold((0.0, 0.0), |(num, den), r| {
            let x = (r.nodes * r.nodes) as f64;
            (num + x * r.saved_j[0], den + x * x)
        });
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// The reproduction as a table, with the projection to 1024 nodes.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5} | {:>7} | {:>22} | {:>17} | {:>19} | {:>12}",
        "nodes",
        "crashes",
        "recomputed per crash",
        "idle node-hours",
        "energy saved (MJ)",
        "run time (h)"
    );
    let _ = writeln!(
        out,
        "{:>5} | {:>7} | {:>6} {:>7} {:>7} | {:>8} {:>8} | {:>9} {:>9} | {:>12}",
        "", "", "global", "cone", "logged", "cone", "logged", "cone", "logged", "each"
    );
    for r in rows {
        let per = r.recomputed_per_crash();
        let same = r
            .runtime_s
            .iter()
            .all(|t| (t - r.runtime_s[0]).abs() < 1e-6);
        let _ = writeln!(
            out,
            "{:>5} | {:>7.1} | {:>6.0} {:>7.1} {:>7.1} | {:>8.1} {:>8.1} | {:>9.2} {:>9.2} | {:>9.2}{}",
            r.nodes,
            r.crashes,
            per[0],
            per[1],
            per[2],
            r.idle_node_s[1] / 3600.0,
            r.idle_node_s[2] / 3600.0,
            r.saved_j[0] / 1e6,
            r.saved_j[1] / 1e6,
            r.runtime_s[0] / 3600.0,
            if same { "   " } else { " (!)" },
        );
    }
    let a = quadratic_fit(rows);
    if let Some(r) = rows.iter().find(|r| r.nodes == 1024) {
        let _ = writeln!(
            out,
            "cone's savings fitted as a N^2 over 100..1000 nodes: a = {a:.3} J; at 1024 nodes {:.2} MJ projected, {:.2} MJ simulated",
            a * 1024.0 * 1024.0 / 1e6,
            r.saved_j[0] / 1e6
        );
    }
    out
}

#[cfg(test)]
mod tests;
