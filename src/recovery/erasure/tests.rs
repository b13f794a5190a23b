use super::*;
use crate::level::erasure::BlobEntry;

fn manifest(nodes: Vec<u32>, blobs: Vec<Vec<u32>>) -> GroupManifest {
    GroupManifest {
        job_id: "j".into(),
        checkpoint_id: 3,
        stamp: 7,
        nodes,
        parity: 1,
        piece: 64,
        code: crate::level::erasure::FIRST_CODE.into(),
        blobs: blobs
            .into_iter()
            .map(|ranks| {
                ranks
                    .into_iter()
                    .map(|rank| BlobEntry {
                        rank,
                        record_len: 10,
                        data_len: 20,
                    })
                    .collect()
            })
            .collect(),
    }
}

fn kept(m: &GroupManifest, pos: usize) -> Kept {
    let s = crate::level::erasure::Stripes {
        g: m.nodes.len(),
        p: 1,
    };
    Kept {
        manifest: m.clone(),
        files: m.blobs[pos].iter().map(|e| e.rank).collect(),
        parity: (0..m.nodes.len())
            .filter_map(|t| {
                s.parity_index(t, pos).map(|j| ParityKey {
                    stripe: t as u32,
                    index: j as u32,
                })
            })
            .collect(),
    }
}

#[test]
fn a_lost_node_is_decoded_by_the_lowest_surviving_rank() {
    // Nodes 0,1,2 with ranks {0,1},{2,3},{4,5}; node 1 lost, its ranks
    // now on spare node 9 with nothing.
    let m = manifest(vec![0, 1, 2], vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    let mut offers = vec![Offer::default(); 6];
    offers[0] = Offer {
        own: vec![(3, 7)],
        node: 0,
        kept: vec![kept(&m, 0)],
        committed: vec![],
        ..Offer::default()
    };
    offers[1].own = vec![(3, 7)];
    offers[2].node = 9;
    offers[3].node = 9;
    offers[4] = Offer {
        own: vec![(3, 7)],
        node: 2,
        kept: vec![kept(&m, 2)],
        committed: vec![],
        ..Offer::default()
    };
    offers[5].own = vec![(3, 7)];
    let p = plan(&offers, &[]).unwrap();
    assert_eq!((p.id, p.stamp), (3, 7));
    assert!(p.direct.is_empty());
    assert_eq!(p.decode.len(), 1);
    let d = &p.decode[0];
    assert_eq!(d.decoder, 0);
    assert_eq!(d.missing, vec![1]);
    assert_eq!(d.present, vec![(0, 0), (2, 4)]);
    assert_eq!(d.targets, vec![2, 3]);
}

#[test]
fn two_lost_nodes_of_a_single_parity_group_are_not_recoverable() {
    let m = manifest(vec![0, 1, 2], vec![vec![0], vec![1], vec![2]]);
    let mut offers = vec![Offer::default(); 3];
    offers[0] = Offer {
        own: vec![(3, 7)],
        node: 0,
        kept: vec![kept(&m, 0)],
        committed: vec![],
        ..Offer::default()
    };
    assert_eq!(plan(&offers, &[]), None);
    // A rank whose own level-1 file is damaged gets it from its node.
    offers[1] = Offer {
        own: vec![],
        node: 1,
        kept: vec![kept(&m, 1)],
        committed: vec![],
        ..Offer::default()
    };
    offers[2] = Offer {
        own: vec![(3, 7)],
        node: 2,
        kept: vec![],
        committed: vec![],
        ..Offer::default()
    };
    let p = plan(&offers, &[]).unwrap();
    assert_eq!(p.direct, vec![(1, 1)]);
    assert!(p.decode.is_empty());
}

#[test]
fn kept_data_counts_when_any_node_committed_its_checkpoint() {
    // Node 1 was killed before writing its marker of checkpoint 3;
    // nodes 0 and 2 wrote theirs. Node 0 is lost: node 1's shards
    // still take part in decoding it.
    let m = manifest(vec![0, 1, 2], vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    let mut offers = vec![Offer::default(); 6];
    offers[0].node = 9;
    offers[1].node = 9;
    offers[2] = Offer {
        own: vec![(3, 7)],
        node: 1,
        kept: vec![kept(&m, 1)],
        committed: vec![],
        ..Offer::default()
    };
    offers[3].own = vec![(3, 7)];
    offers[4] = Offer {
        own: vec![(3, 7)],
        node: 2,
        kept: vec![kept(&m, 2)],
        committed: vec![(3, 7)],
        ..Offer::default()
    };
    offers[5].own = vec![(3, 7)];
    let mut filtered = offers.clone();
    retain_committed(&mut filtered);
    assert_eq!(filtered, offers);
    let p = plan(&filtered, &[]).unwrap();
    assert_eq!(p.decode.len(), 1);
    assert_eq!(p.decode[0].targets, vec![0, 1]);
    // Committed by nobody (or by another attempt): nothing counts.
    offers[4].committed = vec![(3, 8)];
    retain_committed(&mut offers);
    assert!(offers.iter().all(|o| o.kept.is_empty()));
    assert_eq!(plan(&offers, &[]), None);
}

#[test]
fn a_spare_that_stood_in_for_a_node_offers_its_position() {
    // Group 0,1,2 promoted while spare node 7 stood in for node 1 (the
    // manifest names node 1); node 0 is lost now, its ranks on node 8.
    let m = manifest(vec![0, 1, 2], vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    let mut offers = vec![Offer::default(); 6];
    offers[0].node = 8;
    offers[1].node = 8;
    offers[2] = Offer {
        own: vec![(3, 7)],
        node: 7,
        stood_in_for: vec![1],
        kept: vec![kept(&m, 1)],
        committed: vec![],
    };
    offers[3] = Offer {
        own: vec![(3, 7)],
        node: 7,
        ..Offer::default()
    };
    offers[4] = Offer {
        own: vec![(3, 7)],
        node: 2,
        kept: vec![kept(&m, 2)],
        ..Offer::default()
    };
    offers[5].own = vec![(3, 7)];
    let p = plan(&offers, &[]).unwrap();
    assert_eq!(p.decode.len(), 1);
    assert_eq!(p.decode[0].present, vec![(1, 2), (2, 4)]);
    assert_eq!(p.decode[0].targets, vec![0, 1]);
    // Without the stand-in, node 7's position is unknown: too little
    // survives.
    offers[2].stood_in_for.clear();
    assert_eq!(plan(&offers, &[]), None);
}
