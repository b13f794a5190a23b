use super::*;
use crate::level::erasure::ErasureCode;

#[test]
fn any_one_lost_shard_of_a_stripe_comes_back_and_two_are_refused() {
    let mut rng = fastrand::Rng::with_seed(3);
    for k in 1..=8 {
        let code = code::Code::new(k, 1).unwrap();
        let data: Vec<Vec<u8>> = (0..k)
            .map(|_| (0..333).map(|_| rng.u8(..)).collect())
            .collect();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut parity = vec![vec![0u8; 333]];
        code.encode(&refs, &mut parity).unwrap();
        // The parity is the sum of the terms the coefficients give.
        assert!((0..k).all(|i| code.coefficients(i).unwrap() == vec![1]));
        for lost in 0..=k {
            let mut shards: Vec<Option<Vec<u8>>> = data
                .iter()
                .cloned()
                .chain(parity.clone())
                .map(Some)
                .collect();
            shards[lost] = None;
            code.reconstruct(&mut shards).unwrap();
            if lost < k {
                assert_eq!(
                    shards[lost].as_ref(),
                    Some(&data[lost]),
                    "k {k}, lost {lost}"
                );
            }
        }
        if k > 1 {
            let mut shards: Vec<Option<Vec<u8>>> = data
                .iter()
                .cloned()
                .chain(parity.clone())
                .map(Some)
                .collect();
            shards[0] = None;
            shards[1] = None;
            let e = code.reconstruct(&mut shards).unwrap_err();
            assert!(e.to_string().contains("2 shards lost"), "{e}");
        }
    }
    assert!(code::Code::new(3, 2).is_err());
}

#[test]
fn groups_survive_one_lost_node_each() {
    let t = Topology::new((0..6).collect()).unwrap();
    let p = protect(&t, &rule(3)).unwrap();
    let lost = |n: &[u32]| n.iter().copied().collect::<BTreeSet<u32>>();
    assert!(p.survives(&lost(&[0, 3])));
    assert!(!p.survives(&lost(&[0, 1])));
    assert_eq!(p.rule(), rule(3));
    // Parity is not a parameter: XOR keeps one.
    assert!(protect(&t, &Rule::new(NAME, [("group_size", 3), ("parity", 2)])).is_err());
}
