use super::*;

fn kept(files: &[(u32, u64, u64)]) -> Kept {
    Kept {
        files: files.to_vec(),
    }
}

#[test]
fn each_file_comes_from_the_lowest_rank_offering_it_in_rank_and_id_order() {
    let offers = [
        kept(&[]),
        kept(&[(5, 2, 9), (5, 1, 8)]),
        kept(&[(5, 2, 9), (7, 2, 9)]),
        kept(&[(7, 2, 9)]),
    ];
    assert_eq!(
        moves(&offers),
        [
            Move {
                rank: 5,
                id: 1,
                from: 1
            },
            Move {
                rank: 5,
                id: 2,
                from: 1
            },
            Move {
                rank: 7,
                id: 2,
                from: 2
            },
        ]
    );
}

#[test]
fn nothing_offered_moves_nothing() {
    assert!(moves(&[kept(&[]), kept(&[])]).is_empty());
    assert!(moves(&[]).is_empty());
}
