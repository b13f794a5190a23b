use super::*;

fn parts(lens: &[usize]) -> Vec<Bytes> {
    lens.iter()
        .enumerate()
        .map(|(i, n)| Bytes::from(vec![i as u8; *n]))
        .collect()
}

#[test]
fn a_packed_message_unpacks_to_its_contributions() {
    for lens in [vec![], vec![0], vec![3, 0, 5], vec![1; 40]] {
        let p = parts(&lens);
        assert_eq!(unpack(Bytes::from(pack(&p)), 1, "gather").unwrap(), p);
    }
}

/// A peer's message that does not add up is a mismatch naming it, never
/// a panic or an allocation of what it claims.
#[test]
fn a_message_that_does_not_add_up_is_refused() {
    let good = pack(&parts(&[3, 4]));
    let mut cases: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
    let mut longer = good.clone();
    longer.push(0);
    cases.push(longer);
    let mut huge_count = good.clone();
    huge_count[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
    cases.push(huge_count);
    let mut huge_len = good.clone();
    huge_len[8..16].copy_from_slice(&u64::MAX.to_ne_bytes());
    cases.push(huge_len);
    for bad in cases {
        match unpack(Bytes::from(bad.clone()), 7, "gather") {
            Err(CommError::Mismatch { rank: 7, .. }) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
