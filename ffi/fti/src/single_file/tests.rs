use super::*;

fn subset(offset: &[u64], count: &[u64]) -> Subset {
    Subset {
        did: 0,
        offset: offset.to_vec(),
        count: count.to_vec(),
    }
}

/// Element positions of a subset, by the runs, against a direct count.
#[test]
fn runs_cover_a_hyperslab_in_row_major_order() {
    let dims = [4u64, 5, 6];
    let s = subset(&[1, 2, 3], &[2, 3, 2]);
    let mut from_runs = Vec::new();
    let mut next = 0;
    for (at, from, len) in Runs::new(&dims, &s, 8) {
        assert_eq!(from, next, "the variable is filled in order");
        next += len;
        for e in 0..len / 8 {
            from_runs.push(at / 8 + e);
        }
    }
    let mut direct = Vec::new();
    for i in 1..3 {
        for j in 2..5 {
            for k in 3..5 {
                direct.push((i * 5 + j) * 6 + k);
            }
        }
    }
    assert_eq!(from_runs, direct);
    assert_eq!(next, 2 * 3 * 2 * 8);
}

#[test]
fn one_dimension_is_one_run_and_an_empty_subset_none() {
    let runs: Vec<_> = Runs::new(&[100], &subset(&[10], &[25]), 4).collect();
    assert_eq!(runs, vec![(40, 0, 100)]);
    assert_eq!(Runs::new(&[4, 4], &subset(&[0, 0], &[0, 4]), 4).count(), 0);
}

#[test]
fn single_file_names_sort_by_checkpoint() {
    assert_eq!(dir_name("VPR-h5", 7), "VPR-h5-ID00000007.frame");
}
