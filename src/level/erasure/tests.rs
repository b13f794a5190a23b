use super::*;

/// Encodes blobs stripe by stripe with the terms each data shard adds
/// (under the code named `code`), drops `lost` positions, and rebuilds
/// their blobs.
fn round_trip(g: usize, p: usize, lens: &[usize], lost: &[usize]) {
    round_trip_with(FIRST_CODE, g, p, lens, lost);
    if p == 1 {
        round_trip_with("xor", g, p, lens, lost);
    }
}

fn round_trip_with(code: &str, g: usize, p: usize, lens: &[usize], lost: &[usize]) {
    let s = Stripes { g, p };
    let blobs: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (j * 13 + i * 101 + 7) as u8).collect())
        .collect();
    let piece = s.piece(*lens.iter().max().unwrap() as u64) as usize;
    let padded: Vec<Vec<u8>> = blobs
        .iter()
        .map(|b| {
            let mut v = b.clone();
            v.resize(piece * s.k(), 0);
            v
        })
        .collect();
    let codec = crate::scheme::erasure_code(code, s.k(), p).unwrap();
    // parity[t][j]
    let mut parity = vec![vec![vec![0u8; piece]; p]; g];
    let mut term = vec![0u8; piece];
    for pos in 0..g {
        for (q, t) in s.data_stripes(pos).into_iter().enumerate() {
            let idx = s.data_index(t, pos).unwrap();
            let coefficients = codec.coefficients(idx).unwrap();
            for j in 0..p {
                scale(
                    coefficients[j],
                    &padded[pos][q * piece..(q + 1) * piece],
                    &mut term,
                );
                add(&mut parity[t][j], &term);
            }
        }
    }
    // Lose `lost`; rebuild every stripe's missing data shards.
    let mut rebuilt = vec![vec![0u8; piece * s.k()]; g];
    for t in 0..g {
        let data = s.data_nodes(t);
        let mut shards: Vec<Option<Vec<u8>>> = data
            .iter()
            .map(|&pos| {
                let q = s.data_stripes(pos).iter().position(|x| *x == t).unwrap();
                (!lost.contains(&pos)).then(|| padded[pos][q * piece..(q + 1) * piece].to_vec())
            })
            .collect();
        for j in 0..p {
            let holder = s.parity_holder(t, j);
            shards.push((!lost.contains(&holder)).then(|| parity[t][j].clone()));
        }
        codec.reconstruct(&mut shards).unwrap();
        for (i, &pos) in data.iter().enumerate() {
            let q = s.data_stripes(pos).iter().position(|x| *x == t).unwrap();
            rebuilt[pos][q * piece..(q + 1) * piece].copy_from_slice(shards[i].as_ref().unwrap());
        }
    }
    for &pos in lost {
        assert_eq!(
            &rebuilt[pos][..lens[pos]],
            &blobs[pos][..],
            "g={g} p={p} lost={lost:?}"
        );
    }
}

#[test]
fn any_p_lost_nodes_of_a_group_are_rebuilt() {
    for g in 2..=7usize {
        for p in 1..g {
            let lens: Vec<usize> = (0..g).map(|i| 1000 + i * 333 + (i % 2) * 50).collect();
            // Every subset of exactly p positions.
            for mask in 0u32..(1 << g) {
                if mask.count_ones() as usize == p {
                    let lost: Vec<usize> = (0..g).filter(|i| mask & (1 << i) != 0).collect();
                    round_trip(g, p, &lens, &lost);
                }
            }
        }
    }
}

#[test]
fn every_node_holds_p_parity_shards_and_g_minus_p_pieces() {
    for g in 2..=9usize {
        for p in 1..g {
            let s = Stripes { g, p };
            for pos in 0..g {
                let held = (0..g).filter(|t| s.parity_index(*t, pos).is_some()).count();
                assert_eq!(held, p);
                assert_eq!(s.data_stripes(pos).len(), g - p);
            }
            for t in 0..g {
                for j in 0..p {
                    assert_eq!(s.parity_index(t, s.parity_holder(t, j)), Some(j));
                }
            }
        }
    }
}

#[test]
fn a_damaged_manifest_is_refused_before_it_is_used() {
    let sound = GroupManifest {
        job_id: "j".into(),
        checkpoint_id: 1,
        stamp: 1,
        nodes: vec![0, 1, 2],
        parity: 1,
        piece: 100,
        code: FIRST_CODE.into(),
        blobs: vec![
            vec![BlobEntry {
                rank: 0,
                record_len: 50,
                data_len: 150,
            }],
            Vec::new(),
            Vec::new(),
        ],
    };
    assert_eq!(sound.check(), Ok(()));
    let mut bad = Vec::new();
    for parity in [0, 3, 9] {
        bad.push(GroupManifest {
            parity,
            ..sound.clone()
        });
    }
    bad.push(GroupManifest {
        piece: 0,
        ..sound.clone()
    });
    bad.push(GroupManifest {
        blobs: vec![Vec::new(); 2],
        ..sound.clone()
    });
    let mut long = sound.clone();
    long.blobs[0][0].data_len = 151;
    bad.push(long);
    let mut huge = sound.clone();
    huge.blobs[0][0].record_len = u64::MAX;
    bad.push(huge);
    let mut wrapping = sound.clone();
    wrapping.blobs[0][0].data_len = u64::MAX;
    bad.push(wrapping);
    for m in bad {
        assert!(m.check().is_err(), "{m:?}");
    }
}

#[test]
fn a_manifest_written_before_codes_were_named_is_reed_solomon() {
    let old = r#"{"job_id":"j","checkpoint_id":1,"stamp":1,"nodes":[0,1],"parity":1,"piece":64,"blobs":[[],[]]}"#;
    let m: GroupManifest = serde_json::from_str(old).unwrap();
    assert_eq!(m.code, FIRST_CODE);
}

proptest::proptest! {
    /// Any manifest a damaged or foreign file could hold is refused by
    /// `check`, or its stripes can be laid out without overflow or panic.
    #[test]
    fn any_manifest_is_refused_or_laid_out(
        nodes in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..12),
        parity in 0u32..14,
        piece in proptest::prelude::any::<u64>(),
        lens in proptest::collection::vec(
            proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..3),
            0..12),
    ) {
        let m = GroupManifest {
            job_id: "j".into(),
            checkpoint_id: 1,
            stamp: 1,
            nodes,
            parity,
            piece,
            blobs: lens
                .iter()
                .map(|b| {
                    b.iter()
                        .enumerate()
                        .map(|(i, (r, d))| BlobEntry { rank: i as u32, record_len: *r, data_len: *d })
                        .collect()
                })
                .collect(),
            code: FIRST_CODE.into(),
        };
        if m.check().is_ok() {
            let s = Stripes { g: m.nodes.len(), p: m.parity as usize };
            for pos in 0..s.g {
                proptest::prop_assert!(blob_len(&m.blobs[pos]) <= m.piece * s.k() as u64);
                for t in s.data_stripes(pos) {
                    proptest::prop_assert!(s.data_index(t, pos).is_some());
                }
                for j in 0..s.p {
                    proptest::prop_assert!(s.parity_holder(pos, j) < s.g);
                }
            }
        }
    }
}
