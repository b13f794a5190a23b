//! The planner against a brute-force model of where the bytes live: level
//! 1 and 2 by the nodes holding each rank's data, level 3 by actually
//! encoding small blobs with the erasure code, dropping the failed nodes'
//! shards and decoding. Every subset of failed nodes (a spare included) on
//! every small topology.

use super::*;
use crate::level::erasure::{Codec, Stripes};

#[test]
fn four_nodes_in_one_group_lose_two_partners_or_one_node() {
    // Four nodes, one rank each, one group of four with one parity.
    let layout = Topology::new(vec![0, 1, 2, 3], 4, 1).unwrap();
    let committed = [
        Committed {
            level: Level::L1,
            id: 30,
            stamp: 7,
            layout: layout.clone(),
        },
        Committed {
            level: Level::L2,
            id: 20,
            stamp: 5,
            layout: layout.clone(),
        },
        Committed {
            level: Level::L3,
            id: 20,
            stamp: 5,
            layout: layout.clone(),
        },
        Committed {
            level: Level::L4,
            id: 10,
            stamp: 3,
            layout,
        },
    ];
    // Nodes 1 and 2 are partners: level 2 is out, level 3 (one parity) too.
    let failure = Failure::nodes([1, 2]);
    let choice = plan(&failure, &committed, &[]).unwrap();
    assert_eq!((choice.level, choice.id), (Level::L4, 10));
    // Node 1 alone: its partner keeps its copy.
    let choice = plan(&Failure::nodes([1]), &committed, &[]).unwrap();
    assert_eq!((choice.level, choice.id), (Level::L2, 20));
}

#[allow(clippy::needless_range_loop)] // stripes index several tables
/// Whether level 3 of `layout` really rebuilds every lost node's blob.
fn erasure_survives(layout: &Topology, failure: &Failure, rng: &mut fastrand::Rng) -> bool {
    for group in layout.groups() {
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
        let codec = Codec::new(s.k(), p).unwrap();
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

/// Whether `level` of `layout` survives `failure`, from where each rank's
/// bytes live.
fn brute(level: Level, layout: &Topology, failure: &Failure, rng: &mut fastrand::Rng) -> bool {
    let alive = |n: u32| !failure.nodes.contains(&n);
    match level {
        Level::L1 => layout.placement().iter().all(|n| alive(*n)),
        Level::L2 => layout.placement().iter().all(|n| {
            let mut holders = vec![*n];
            holders.extend(layout.partner(*n));
            holders.into_iter().any(alive)
        }),
        Level::L3 => erasure_survives(layout, failure, rng),
        Level::L4 => true,
    }
}

/// Small layouts: 1 to 6 nodes with gaps in their ids, one or two ranks
/// per node, every group size and parity up to 5.
fn layouts() -> Vec<Topology> {
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
                    out.push(Topology::new(placement.clone(), size, parity).unwrap());
                }
            }
        }
    }
    out
}

/// Every subset of the layout's nodes plus one spare node.
fn failures(layout: &Topology) -> Vec<Failure> {
    let mut candidates = layout.nodes().to_vec();
    candidates.push(1000);
    (0u32..1 << candidates.len())
        .map(|mask| {
            Failure::nodes(
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
    for layout in layouts() {
        for failure in failures(&layout) {
            for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
                let expected = brute(level, &layout, &failure, &mut rng);
                assert_eq!(
                    usable(level, &layout, &failure),
                    expected,
                    "{level} of {layout:?} with nodes {:?} failed",
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
    failure: &Failure,
    committed: &[Committed],
    excluded: &[(Level, u64)],
    rng: &mut fastrand::Rng,
) -> Option<(Level, u64)> {
    let mut best: Option<(Level, u64)> = None;
    for id in 1..=8 {
        for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
            let ok = committed.iter().any(|c| {
                c.id == id
                    && c.level == level
                    && !excluded.contains(&(level, id))
                    && brute(level, &c.layout, failure, rng)
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
    let before = Topology::new(vec![0, 1, 2, 3, 4, 5], 3, 1).unwrap();
    // After node 1 died: its rank moved to spare node 9.
    let after = Topology::new(vec![0, 9, 2, 3, 4, 5], 3, 1).unwrap();
    let mut levels_seen = std::collections::BTreeSet::new();
    for _ in 0..3000 {
        let mut committed = Vec::new();
        for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
            for id in 1..=8 {
                if rng.u8(..4) == 0 {
                    let layout = if rng.bool() { &before } else { &after };
                    committed.push(Committed {
                        level,
                        id,
                        stamp: id * 10,
                        layout: layout.clone(),
                    });
                }
            }
        }
        let failure = Failure::nodes((0..10).filter(|_| rng.u8(..5) == 0));
        let excluded: Vec<(Level, u64)> = committed
            .iter()
            .filter(|_| rng.u8(..8) == 0)
            .map(|c| (c.level, c.id))
            .collect();
        let got = plan(&failure, &committed, &excluded).map(|c| (c.level, c.id));
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
    let layout = Topology::new(vec![0, 1, 2, 3], 4, 1).unwrap();
    let at = |level| Committed {
        level,
        id: 5,
        stamp: 1,
        layout: layout.clone(),
    };
    let all = [at(Level::L4), at(Level::L3), at(Level::L2), at(Level::L1)];
    let choose = |f: &Failure, ex: &[(Level, u64)]| plan(f, &all, ex).map(|c| c.level);
    assert_eq!(choose(&Failure::default(), &[]), Some(Level::L1));
    assert_eq!(choose(&Failure::nodes([2]), &[]), Some(Level::L2));
    // Damage found while loading level 2 sends everyone to level 3.
    assert_eq!(
        choose(&Failure::nodes([2]), &[(Level::L2, 5)]),
        Some(Level::L3)
    );
    // Partners 0 and 1 both lost: two losses exceed the group's parity.
    assert_eq!(choose(&Failure::nodes([0, 1]), &[]), Some(Level::L4));
    assert_eq!(choose(&Failure::nodes([0, 1]), &[(Level::L4, 5)]), None);
    // Soft failures alone leave level 1.
    let soft = Failure {
        nodes: BTreeSet::new(),
        ranks: [1, 2].into(),
    };
    assert_eq!(choose(&soft, &[]), Some(Level::L1));
}
