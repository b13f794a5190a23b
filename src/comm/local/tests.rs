use super::*;
use crate::comm::ReduceOp;

fn run_ok<T: Send>(size: usize, f: impl Fn(LocalComm) -> T + Sync) -> Vec<T> {
    let _deadline = crate::testing::Deadline::new(std::time::Duration::from_secs(60));
    LocalComm::run(size, 2, f)
        .into_iter()
        .map(|r| r.expect("rank panicked"))
        .collect()
}

#[test]
fn collectives_agree_for_many_sizes() {
    for size in 1..=9 {
        let out = run_ok(size, |c| {
            let r = c.rank() as u64;
            let mut v = [r, r, r, 1 << r, r];
            c.all_reduce_u64(&mut v[0..1], ReduceOp::Sum).unwrap();
            c.all_reduce_u64(&mut v[1..2], ReduceOp::Min).unwrap();
            c.all_reduce_u64(&mut v[2..3], ReduceOp::Max).unwrap();
            c.all_reduce_u64(&mut v[3..4], ReduceOp::Or).unwrap();
            let mut b = if c.rank() == size - 1 {
                vec![7u8; 3]
            } else {
                vec![]
            };
            c.broadcast(&mut b, size - 1).unwrap();
            let g = c.all_gather(&[c.rank() as u8; 2]).unwrap();
            c.barrier().unwrap();
            (v, b, g)
        });
        let n = size as u64;
        for (v, b, g) in out {
            assert_eq!(v[0], n * (n - 1) / 2);
            assert_eq!(v[1], 0);
            assert_eq!(v[2], n - 1);
            assert_eq!(v[3], (1u64 << n) - 1);
            assert_eq!(b, vec![7u8; 3]);
            let expect: Vec<Vec<u8>> = (0..size).map(|r| vec![r as u8; 2]).collect();
            assert_eq!(g.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), expect);
        }
    }
}

/// Gathering at every root of jobs of 1 to 9 ranks, contributions of
/// different lengths: the root gets them in rank order, the others
/// nothing.
#[test]
fn gather_reaches_every_root_in_rank_order() {
    for size in 1..=9 {
        for root in 0..size {
            let out = run_ok(size, |c| {
                let mine = vec![c.rank() as u8; c.rank() % 3];
                c.gather(&mine, root).unwrap()
            });
            for (rank, got) in out.into_iter().enumerate() {
                if rank != root {
                    assert!(got.is_none());
                    continue;
                }
                let got: Vec<Vec<u8>> = got.unwrap().iter().map(|b| b.to_vec()).collect();
                let expect: Vec<Vec<u8>> = (0..size).map(|r| vec![r as u8; r % 3]).collect();
                assert_eq!(got, expect, "size {size}, root {root}");
            }
        }
    }
}

#[test]
fn float_sum_is_reproducible() {
    let once = || {
        run_ok(7, |c| {
            let mut v = [0.1 * (c.rank() as f64 + 1.0).powi(3)];
            c.all_reduce_f64(&mut v, ReduceOp::Sum).unwrap();
            v[0].to_bits()
        })
    };
    let a = once();
    assert!(a.iter().all(|x| *x == a[0]));
    assert_eq!(a, once());
}

#[test]
fn messages_match_by_source_and_tag() {
    let out = run_ok(3, |c| match c.rank() {
        0 => {
            c.send(2, 5, b"a5").unwrap();
            c.send(2, 6, b"a6").unwrap();
            Vec::new()
        }
        1 => {
            c.send(2, 5, b"b5").unwrap();
            Vec::new()
        }
        _ => vec![
            c.recv(0, 6).unwrap().to_vec(),
            c.recv(1, 5).unwrap().to_vec(),
            c.recv(0, 5).unwrap().to_vec(),
        ],
    });
    assert_eq!(out[2], vec![b"a6".to_vec(), b"b5".to_vec(), b"a5".to_vec()]);
}

#[test]
fn receive_from_departed_rank_fails_instead_of_hanging() {
    let out = run_ok(2, |c| {
        if c.rank() == 0 {
            return None;
        }
        Some(c.recv(0, 1).unwrap_err().to_string())
    });
    assert_eq!(
        out[1].as_deref(),
        Some("rank 0 failed or left the communicator")
    );
}

#[test]
fn bad_arguments_are_errors() {
    let out = run_ok(2, |c| {
        let bad_rank = c.send(9, 1, b"x").is_err();
        let bad_op = c.all_reduce_f64(&mut [1.0], ReduceOp::And).is_err();
        (bad_rank, bad_op)
    });
    assert!(out.iter().all(|&(a, b)| a && b));
}
