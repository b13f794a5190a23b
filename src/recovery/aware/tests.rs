//! The planner against a brute-force model of where the bytes live: level
//! 1 and 2 by the nodes holding each rank's data, level 3 by actually
//! encoding small blobs with the erasure code, dropping the failed nodes'
//! shards and decoding. Every subset of failed nodes (a spare included) on
//! every small topology, under every number of partner copies and every
//! group setting, with Reed-Solomon and with XOR parity.

use super::*;
use crate::level::erasure::Stripes;
use crate::scheme::{global, partner, reed_solomon};
use reed_solomon::Groups;
use std::collections::BTreeSet;

/// A placement and the settings of every level's scheme.
#[derive(Clone, Debug)]
struct Setting {
    layout: Topology,
    copies: u32,
    size: u32,
    parity: u32,
    /// Level 3 by XOR rather than Reed-Solomon (parity 1 only).
    xor: bool,
}

impl Setting {
    fn new(placement: Vec<u32>, copies: u32, size: u32, parity: u32) -> Self {
        let layout = Topology::new(placement).unwrap();
        Self {
            layout,
            copies,
            size,
            parity,
            xor: false,
        }
    }

    /// `level`'s commit of checkpoint `id`, protected by its scheme under
    /// this setting's rule, as the ranks build it from a marker.
    fn commit(&self, level: Level, id: u64, stamp: u64) -> Committed {
        let rule = match level {
            Level::L1 => None,
            Level::L2 => Some(partner::rule(self.copies)),
            Level::L3 if self.xor => Some(crate::scheme::xor::rule(self.size)),
            Level::L3 => Some(reed_solomon::rule(self.size, self.parity)),
            Level::L4 => Some(global::rule()),
        };
        Committed {
            level,
            id,
            stamp,
            layout: self.layout.clone(),
            protection: rule
                .map(|r| Arc::from(crate::scheme::protection(&self.layout, &r).unwrap())),
        }
    }
}

#[test]
fn four_nodes_in_one_group_lose_two_partners_or_one_node() {
    // Four nodes, one rank each, one partner, one group of four with one
    // parity.
    let setting = Setting::new(vec![0, 1, 2, 3], 1, 4, 1);
    let committed = [
        setting.commit(Level::L1, 30, 7),
        setting.commit(Level::L2, 20, 5),
        setting.commit(Level::L3, 20, 5),
        setting.commit(Level::L4, 10, 3),
    ];
    // Nodes 1 and 2 are partners: level 2 is out, level 3 (one parity) too.
    let failure = FailureTopology::of_nodes([1, 2]);
    let choice = plan(&failure, &committed, &[]).unwrap();
    assert_eq!((choice.level, choice.id), (Level::L4, 10));
    // Node 1 alone: its partner keeps its copy.
    let choice = plan(&FailureTopology::of_nodes([1]), &committed, &[]).unwrap();
    assert_eq!((choice.level, choice.id), (Level::L2, 20));
}

#[allow(clippy::needless_range_loop)] // stripes index several tables
/// Whether level 3 of `setting` really rebuilds every lost node's blob.
fn erasure_survives(setting: &Setting, failure: &FailureTopology, rng: &mut fastrand::Rng) -> bool {
    let groups = Groups::new(&setting.layout, setting.size, setting.parity);
    for group in groups.all() {
        let g = group.nodes.len();
        let p = group.parity as usize;
        let lost: Vec<usize> = (0..g)
            .filter(|pos| failure.nodes.contains(&group.nodes[*pos]))
            .collect();
        if lost.is_empty() {
            continue;
        }
        if p == 0 {
            return false;
        }
        let s = Stripes { g, p };
        let blobs: Vec<Vec<u8>> = (0..g)
            .map(|_| (0..rng.usize(1..300)).map(|_| rng.u8(..)).collect())
            .collect();
        let largest = blobs.iter().map(Vec::len).max().unwrap_or(0) as u64;
        let piece = s.piece(largest) as usize;
        let name = if setting.xor {
            "xor"
        } else {
            crate::level::erasure::FIRST_CODE
        };
        let codec = crate::scheme::erasure_code(name, s.k(), p).unwrap();
        // shards[t] = k data pieces then p parity pieces of stripe t.
        let mut wanted = vec![Vec::new(); g];
        for t in 0..g {
            let data: Vec<Vec<u8>> = s
                .data_nodes(t)
                .iter()
                .map(|pos| {
                    let q = s.data_stripes(*pos).iter().position(|x| *x == t).unwrap();
                    let mut piece_bytes = vec![0u8; piece];
                    let blob = &blobs[*pos];
                    let start = (q * piece).min(blob.len());
                    let end = ((q + 1) * piece).min(blob.len());
                    piece_bytes[..end - start].copy_from_slice(&blob[start..end]);
                    piece_bytes
                })
                .collect();
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut parity = vec![vec![0u8; piece]; p];
            codec.encode(&refs, &mut parity).unwrap();
            let mut shards: Vec<Option<Vec<u8>>> = data.iter().cloned().map(Some).collect();
            shards.extend(parity.into_iter().map(Some));
            // Drop what the failed positions held.
            for (i, pos) in s.data_nodes(t).iter().enumerate() {
                if lost.contains(pos) {
                    shards[i] = None;
                }
            }
            for j in 0..p {
                if lost.contains(&s.parity_holder(t, j)) {
                    shards[s.k() + j] = None;
                }
            }
            if codec.reconstruct(&mut shards).is_err() {
                return false;
            }
            wanted[t] = shards;
        }
        // Every lost blob comes back bit for bit.
        for &pos in &lost {
            let mut blob = Vec::new();
            for t in s.data_stripes(pos) {
                let i = s.data_index(t, pos).unwrap();
                blob.extend_from_slice(wanted[t][i].as_ref().unwrap());
            }
            if blob[..blobs[pos].len()] != blobs[pos][..] {
                return false;
            }
        }
    }
    true
}

/// Whether `level` of `setting` survives `failure`, from where each
/// rank's bytes live.
fn brute(
    level: Level,
    setting: &Setting,
    failure: &FailureTopology,
    rng: &mut fastrand::Rng,
) -> bool {
    let alive = |n: u32| !failure.nodes.contains(&n);
    let layout = &setting.layout;
    match level {
        Level::L1 => layout.placement().iter().all(|n| alive(*n)),
        Level::L2 => layout.placement().iter().all(|n| {
            let mut holders = vec![*n];
            holders.extend(partner::Partners::new(layout, setting.copies).of(*n));
            holders.into_iter().any(alive)
        }),
        Level::L3 => erasure_survives(setting, failure, rng),
        Level::L4 => true,
    }
}

/// Small layouts: 1 to 6 nodes with gaps in their ids, one or two ranks
/// per node, one to three partner copies, every group size and parity up
/// to 5.
fn settings() -> Vec<Setting> {
    let mut out = Vec::new();
    for nodes in 1..=6u32 {
        for two in [false, true] {
            let mut placement = Vec::new();
            for i in 0..nodes {
                let node = 3 * i + 1;
                placement.push(node);
                if two && i % 2 == 0 {
                    placement.push(node);
                }
            }
            for size in 2..=5 {
                for parity in 1..size {
                    let copies = 1 + (size + parity) % 3;
                    out.push(Setting::new(placement.clone(), copies, size, parity));
                    if parity == 1 {
                        let mut xor = Setting::new(placement.clone(), copies, size, parity);
                        xor.xor = true;
                        out.push(xor);
                    }
                }
            }
        }
    }
    out
}

/// Every subset of the layout's nodes plus one spare node.
fn failures(layout: &Topology) -> Vec<FailureTopology> {
    let mut candidates = layout.nodes().to_vec();
    candidates.push(1000);
    (0u32..1 << candidates.len())
        .map(|mask| {
            FailureTopology::of_nodes(
                candidates
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, n)| *n),
            )
        })
        .collect()
}

#[test]
fn usable_matches_where_the_bytes_live_for_every_failure_set() {
    let mut rng = fastrand::Rng::with_seed(4);
    let mut cases = 0;
    let mut survives = [0; 4];
    for setting in settings() {
        for failure in failures(&setting.layout) {
            for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
                let expected = brute(level, &setting, &failure, &mut rng);
                assert_eq!(
                    usable(&setting.commit(level, 1, 1), &failure),
                    expected,
                    "{level} of {setting:?} with nodes {:?} failed",
                    failure.nodes
                );
                cases += 1;
                survives[level as usize - 1] += usize::from(expected);
            }
        }
    }
    // The sweep covered both outcomes at every level but the fourth.
    assert!(cases > 10_000, "{cases}");
    assert!(survives[0] > 0 && survives[1] > survives[0] && survives[2] > survives[0]);
}

/// The newest id any usable level holds, and the lowest level holding it,
/// found by trying every (id, level) pair.
fn brute_choice(
    failure: &FailureTopology,
    committed: &[(Committed, &Setting)],
    excluded: &[(Level, u64)],
    rng: &mut fastrand::Rng,
) -> Option<(Level, u64)> {
    let mut best: Option<(Level, u64)> = None;
    for id in 1..=8 {
        for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
            let ok = committed.iter().any(|(c, setting)| {
                c.id == id
                    && c.level == level
                    && !excluded.contains(&(level, id))
                    && brute(level, setting, failure, rng)
            });
            if ok && best.is_none_or(|(_, b)| id > b) {
                best = Some((level, id));
            }
        }
    }
    best
}

#[test]
fn plan_picks_the_newest_restorable_checkpoint_at_its_lowest_level() {
    let mut rng = fastrand::Rng::with_seed(11);
    let before = Setting::new(vec![0, 1, 2, 3, 4, 5], 1, 3, 1);
    // After node 1 died: its rank moved to spare node 9, and level 2
    // was configured with two copies.
    let after = Setting::new(vec![0, 9, 2, 3, 4, 5], 2, 3, 1);
    let mut levels_seen = std::collections::BTreeSet::new();
    for _ in 0..3000 {
        let mut committed = Vec::new();
        for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
            for id in 1..=8 {
                if rng.u8(..4) == 0 {
                    let setting = if rng.bool() { &before } else { &after };
                    committed.push((setting.commit(level, id, id * 10), setting));
                }
            }
        }
        let failure = FailureTopology::of_nodes((0..10).filter(|_| rng.u8(..5) == 0));
        let excluded: Vec<(Level, u64)> = committed
            .iter()
            .filter(|_| rng.u8(..8) == 0)
            .map(|(c, _)| (c.level, c.id))
            .collect();
        let only: Vec<Committed> = committed.iter().map(|(c, _)| c.clone()).collect();
        let got = plan(&failure, &only, &excluded).map(|c| (c.level, c.id));
        assert_eq!(
            got,
            brute_choice(&failure, &committed, &excluded, &mut rng),
            "nodes {:?} failed, committed {committed:?}",
            failure.nodes
        );
        if let Some((level, _)) = got {
            levels_seen.insert(level);
        }
    }
    assert_eq!(levels_seen.len(), 4, "{levels_seen:?}");
}

#[test]
fn a_checkpoint_at_several_levels_comes_from_the_lowest_usable_one() {
    let setting = Setting::new(vec![0, 1, 2, 3], 1, 4, 1);
    let at = |level| setting.commit(level, 5, 1);
    let all = [at(Level::L4), at(Level::L3), at(Level::L2), at(Level::L1)];
    let choose = |f: &FailureTopology, ex: &[(Level, u64)]| plan(f, &all, ex).map(|c| c.level);
    assert_eq!(choose(&FailureTopology::default(), &[]), Some(Level::L1));
    assert_eq!(
        choose(&FailureTopology::of_nodes([2]), &[]),
        Some(Level::L2)
    );
    // Damage found while loading level 2 sends everyone to level 3.
    assert_eq!(
        choose(&FailureTopology::of_nodes([2]), &[(Level::L2, 5)]),
        Some(Level::L3)
    );
    // Partners 0 and 1 both lost: two losses exceed the group's parity.
    assert_eq!(
        choose(&FailureTopology::of_nodes([0, 1]), &[]),
        Some(Level::L4)
    );
    assert_eq!(
        choose(&FailureTopology::of_nodes([0, 1]), &[(Level::L4, 5)]),
        None
    );
    // Soft failures alone leave level 1.
    let soft = FailureTopology {
        nodes: BTreeSet::new(),
        ranks: [1, 2].into(),
    };
    assert_eq!(choose(&soft, &[]), Some(Level::L1));
}
